#pragma once
/// Creating tensors.

#include <vector>

#include "engine/random.h"
#include "engine/tensor.h"

namespace tandem {

/// Uninitialised memory.
Tensor empty(const Shape& shape, const TensorOptions& options = {});
Tensor full(const Shape& shape, double value, const TensorOptions& options = {});
inline Tensor zeros(const Shape& shape, const TensorOptions& options = {}) {
  return full(shape, 0.0, options);
}
inline Tensor ones(const Shape& shape, const TensorOptions& options = {}) {
  return full(shape, 1.0, options);
}
/// A tensor with the same shape, dtype, device and memory format as `like`.
Tensor empty_like(const Tensor& like);
Tensor zeros_like(const Tensor& like);
/// The dtype, device and memory format of `like` (not requires_grad).
TensorOptions options_like(const Tensor& like);

/// Copies host values into a new tensor whose dtype follows T, as torch.tensor infers it:
/// `from_vector(std::vector<int64_t>{3, 1}, {2})` is int64. options.dtype is T's dtype or left
/// at its default (float32 there means "not given"); any other dtype is refused, never converted.
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape,
                   const TensorOptions& options = {});

/// Standard normal values times `stddev`, plus `mean`.
Tensor randn(const Shape& shape, Generator& generator, const TensorOptions& options = {},
             float mean = 0.0f, float stddev = 1.0f);
/// Uniform in [low, high).
Tensor uniform(const Shape& shape, float low, float high, Generator& generator,
               const TensorOptions& options = {});

}  // namespace tandem
