#pragma once
/// Joining tensors: what DataParallel's gather needs.

#include <vector>

#include "engine/tensor.h"

namespace tandem {

/// Concatenates along dim 0 (torch.cat(tensors, 0)). All tensors share dtype, device and every
/// size but the first. Differentiable: each input gets its rows of the output's gradient.
Tensor cat(const std::vector<Tensor>& tensors);

}  // namespace tandem
