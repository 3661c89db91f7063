#pragma once
/// Optimizer updates: in place, never recorded by autograd.

#include "engine/backend.h"
#include "engine/tensor.h"

namespace tandem {

/// One torch.optim.SGD step for one parameter. momentum_buffer must have the
/// parameter's shape when options.momentum != 0 (it is ignored otherwise).
void sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buffer,
              const SgdStepOptions& options);

}  // namespace tandem
