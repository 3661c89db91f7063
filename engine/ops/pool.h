#pragma once
/// Pooling over the spatial dims of (N, C, H, W), float32 or bfloat16 (the result in the input's
/// dtype, Note [bfloat16 activations] in engine/backend/backend.h).

#include "engine/backend/op_options.h"
#include "engine/tensor.h"

namespace tandem {

/// Max over kernel_size² windows; padding counts as -infinity (as PyTorch).
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options);
/// Averages into an (N, C, out_h, out_w) grid with torch.nn.AdaptiveAvgPool2d's bins.
Tensor adaptive_avg_pool2d(const Tensor& x, int64_t out_h, int64_t out_w);

}  // namespace tandem
