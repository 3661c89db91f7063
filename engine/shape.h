#pragma once
/// Shapes and strides are small vectors of int64 (PyTorch's convention: sizes
/// and strides in elements, not bytes).

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);
std::string shape_str(const Shape& shape);

/// NumPy broadcasting of two shapes; throws naming `op` when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

/// Strides that read a tensor of `shape` (contiguous) as if it had `target`
/// shape: broadcast dimensions get stride 0. `shape` must broadcast to `target`.
Shape broadcast_strides(const Shape& shape, const Shape& target);

}  // namespace tandem
