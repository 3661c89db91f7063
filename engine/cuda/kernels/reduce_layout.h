#pragma once
/// The ReduceLayout of a sum over `dims` of a contiguous tensor (engine/cuda/reduce.cpp builds
/// it for sum()). Host only; no CUDA include.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/cuda/kernels/types.h"
#include "engine/error.h"
#include "engine/shape.h"

namespace tandem::cuda::kernels {

inline void push_dim(StridedLayout& layout, int64_t size, int64_t stride) {
  TANDEM_CHECK(layout.rank < kMaxDims, "[sum] more than ", kMaxDims,
               " alternating kept and reduced dims are not supported");
  layout.size[layout.rank] = size;
  layout.stride[layout.rank] = stride;
  ++layout.rank;
}

/// Splits the dims of a contiguous input of `shape` into kept and reduced ones (`dims`), merging
/// neighbours of the same kind (their strides stay valid because the input is contiguous) and
/// dropping dims of size 1.
inline ReduceLayout reduce_layout(const Shape& shape, const std::vector<int64_t>& dims) {
  const Shape strides = contiguous_strides(shape);
  ReduceLayout layout;
  int previous = -1;  // 0: kept, 1: reduced
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    const bool reduced = std::find(dims.begin(), dims.end(), static_cast<int64_t>(i)) != dims.end();
    StridedLayout& target = reduced ? layout.reduced : layout.kept;
    if (previous == static_cast<int>(reduced)) {
      target.size[target.rank - 1] *= shape[i];
      target.stride[target.rank - 1] = strides[i];
    } else {
      push_dim(target, shape[i], strides[i]);
    }
    previous = static_cast<int>(reduced);
    (reduced ? layout.reduce_count : layout.outputs) *= shape[i];
  }
  return layout;
}

}  // namespace tandem::cuda::kernels
