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

/// Copies host values into a new tensor (options.dtype must match T).
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
