#pragma once
/// One place that turns a shape and its operands' strides into the fewest dims a strided kernel
/// must walk: the CPU and CUDA elementwise and copy kernels all index through it. CUDA-free, so
/// its edge cases are unit-tested on any machine.

#include <cstddef>
#include <initializer_list>
#include <vector>

#include "engine/shape.h"

namespace tandem {

/// A shape walked by several operands at once, each with its own strides (in elements, 0 along
/// a broadcast dim), after collapse_dims.
struct CollapsedDims {
  Shape shape;                 ///< outermost first; never empty: {1} for one element, {0} if none
  std::vector<Shape> strides;  ///< strides[operand][dim], one Shape per operand, as shape's rank
  size_t rank() const { return shape.size(); }
};

/// Note [Collapsing dims]: size-1 dims are dropped (they carry no index), and a dim merges into
/// its outer neighbour when every operand steps over the pair as over one dim, i.e. its outer
/// stride equals its own stride times its size. A contiguous operand thus becomes one dim, and so
/// do dims broadcast in every operand (0 == 0 * size). An empty shape (numel 0) becomes {0} and
/// one element (a 0-d tensor, all dims of size 1) becomes {1}, both with stride 1 everywhere, so
/// a kernel's contiguous fast path takes them. `strides` holds one Shape per operand, each of
/// `shape`'s rank; throws naming `op` otherwise.
CollapsedDims collapse_dims(const Shape& shape, std::initializer_list<Shape> strides,
                            const char* op);

/// Throws "[op] more than `max_dims` dims that do not merge are not supported (shape ...)" when
/// `dims` has more than a fixed-size kernel layout holds; `shape` is the one before collapsing.
void check_collapsed_rank(const CollapsedDims& dims, int max_dims, const Shape& shape,
                          const char* op);

}  // namespace tandem
