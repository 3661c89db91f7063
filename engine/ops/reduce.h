#pragma once
/// Reductions.

#include <vector>

#include "engine/tensor.h"

namespace tandem {

/// Sum of all elements, shape (). sum() takes float32 or bfloat16 and returns the same dtype
/// (a bfloat16 sum is accumulated in double and rounded once); mean() takes float32.
Tensor sum(const Tensor& x);
/// Sum over `dims` (negative dims count from the end).
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
/// Sums a broadcast result back to `shape` (the backward of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape);
/// Index of the largest value in each row of (N, K): (N) int64. Not differentiable.
Tensor argmax(const Tensor& x);

}  // namespace tandem
