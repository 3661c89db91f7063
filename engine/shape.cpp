#include "engine/shape.h"

#include <algorithm>

#include "engine/error.h"

namespace tandem {

int64_t shape_numel(const Shape& shape) {
  // A zero anywhere makes the count 0, even where the others would overflow (review S9).
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t n = 1;
  for (int64_t size : shape) {
    TANDEM_CHECK(!__builtin_mul_overflow(n, size, &n), "[shape] ", shape_str(shape),
                 " has more elements than fit in 64 bits");
  }
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    // A zero dimension counts as 1, so the strides of an empty tensor still multiply the others.
    TANDEM_CHECK(!__builtin_mul_overflow(stride, std::max<int64_t>(shape[i], 1), &stride),
                 "[shape] the strides of ", shape_str(shape), " overflow 64 bits");
  }
  return strides;
}

std::string shape_str(const Shape& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    TANDEM_CHECK(da == db || da == 1 || db == 1, "[", op, "] shapes ", shape_str(a), " and ",
                 shape_str(b), " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Shape& shape, const Shape& target) {
  const Shape own = contiguous_strides(shape);
  Shape strides(target.size(), 0);
  const size_t lead = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    strides[lead + i] = shape[i] == 1 ? 0 : own[i];
  }
  return strides;
}

}  // namespace tandem
