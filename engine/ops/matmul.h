#pragma once
/// Matrix products.

#include "engine/tensor.h"

namespace tandem {

/// a: (M, K) @ b: (K, N) → (M, N).
Tensor matmul(const Tensor& a, const Tensor& b);
/// x: (N, in) @ weightᵀ, weight: (out, in), bias: (out) or undefined → (N, out), as torch's
/// F.linear.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace tandem
