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

}  // namespace tandem
