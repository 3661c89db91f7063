#pragma once
/// The differentiable dtype conversion of mixed precision: float32 weights and inputs become
/// bfloat16 for the layers that compute in it, and their gradients come back in the source's
/// dtype (PyTorch's `tensor.to(torch.bfloat16)` under autocast). Tensor::to(DType) is the
/// data-only twin it is built on: the same values and format, no autograd.

#include "engine/tensor.h"

namespace tandem {

/// `x` in `dtype`, same shape and memory format (a channels-last tensor stays channels-last);
/// `x` itself when it already is `dtype`. Rounds to nearest even (Note [Half conversions]).
/// The backward casts the gradient back to x's dtype.
Tensor cast(const Tensor& x, DType dtype);

/// out = src converted to out's dtype, into out's memory (dense, src's shape), never recorded:
/// Tensor::to(DType) without the allocation, for a buffer that already exists (DDP's gradient
/// bucket after a compressed all-reduce).
Tensor& cast_out(const Tensor& src, Tensor& out);

}  // namespace tandem
