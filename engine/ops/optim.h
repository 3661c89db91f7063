#pragma once
/// Optimizer updates: in place, never recorded by autograd.

#include <vector>

#include "engine/backend/op_options.h"
#include "engine/tensor.h"

namespace tandem {

/// One torch.optim.SGD step for one parameter. momentum_buffer must have the
/// parameter's shape when options.momentum != 0 (it is ignored otherwise).
void sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buffer,
              const SgdStepOptions& options);

/// sgd_step() for many parameters at once, bit for bit the same result per parameter: the
/// multi-tensor (foreach) update of torch.optim.SGD. Every tensor must live on one device; each
/// parameter is checked as sgd_step() checks it. On CUDA it launches one kernel per chunk of
/// tensors instead of one per parameter (Note [Multi-tensor SGD] in cuda/kernels/elementwise.cu).
void sgd_step_multi(const std::vector<SgdTensors>& tensors, const SgdStepOptions& options);

/// What a gradient scaler's unscale runs (PyTorch's _amp_foreach_non_finite_check_and_unscale_):
/// adds 1 to `found_inf` when any element of any gradient is inf or NaN (so a zeroed flag ends 0
/// or 1, as PyTorch's), then multiplies every gradient by `inv_scale` in place (not at all when
/// it is 1). The check looks at the gradients as given, before the multiply, as PyTorch's does.
/// grads: float32, dense, on found_inf's device; found_inf: float32, one element. Never reads a
/// value on the host. Note [Finding inf and NaN] in optim.cpp says how.
void non_finite_check_and_unscale_(const std::vector<Tensor>& grads, Tensor& found_inf,
                                   float inv_scale);

}  // namespace tandem
