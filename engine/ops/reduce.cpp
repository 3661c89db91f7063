#include "engine/ops/reduce.h"

#include <algorithm>

#include "engine/autograd/node.h"
#include "engine/backend/backend.h"
#include "engine/ops/checks.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/factory.h"
#include "engine/profiler.h"

namespace tandem {
namespace {

using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

// Normalised, sorted, unique dims.
std::vector<int64_t> normalise_dims(const std::vector<int64_t>& dims, int64_t rank,
                                    const char* op) {
  std::vector<int64_t> result;
  for (int64_t d : dims) {
    const int64_t wrapped = d < 0 ? d + rank : d;
    TANDEM_CHECK(wrapped >= 0 && wrapped < rank, "[", op, "] dim ", d, " out of range for ", rank,
                 " dims");
    result.push_back(wrapped);
  }
  std::sort(result.begin(), result.end());
  result.erase(std::unique(result.begin(), result.end()), result.end());
  return result;
}

Shape keepdim_shape(const Shape& shape, const std::vector<int64_t>& dims) {
  Shape out = shape;
  for (int64_t d : dims) out[static_cast<size_t>(d)] = 1;
  return out;
}

Shape squeezed_shape(const Shape& shape, const std::vector<int64_t>& dims) {
  Shape out;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(i)) == dims.end()) {
      out.push_back(shape[i]);
    }
  }
  return out;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& requested, bool keepdim) {
  const profiler::RecordScope scope("sum");
  ops::check_float_activation("sum", "input", x);
  const std::vector<int64_t> dims = normalise_dims(requested, x.dim(), "sum");
  const Shape kept = keepdim_shape(x.shape(), dims);
  Tensor out = empty(kept, {.dtype = x.dtype(), .device = x.device()});
  backend_for(x.device()).sum(x.detach().contiguous(), dims, out);
  if (!keepdim) out = out.view(squeezed_shape(x.shape(), dims));
  autograd::record("sum", {&x}, {&out}, [kept, sx = x.shape()](const Grads& g, const Needs&) {
    return Grads{expand(g[0].reshape(kept), sx)};
  });
  return out;
}

Tensor sum(const Tensor& x) {
  std::vector<int64_t> all(static_cast<size_t>(x.dim()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  return sum(x, all, false);
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& requested, bool keepdim) {
  const std::vector<int64_t> dims = normalise_dims(requested, x.dim(), "mean");
  int64_t count = 1;
  for (int64_t d : dims) count *= x.shape()[static_cast<size_t>(d)];
  TANDEM_CHECK(count > 0, "[mean] over an empty dimension of shape ", shape_str(x.shape()));
  return mul(sum(x, dims, keepdim), 1.0f / static_cast<float>(count));
}

Tensor mean(const Tensor& x) {
  TANDEM_CHECK(x.numel() > 0, "[mean] of an empty tensor");
  return mul(sum(x), 1.0f / static_cast<float>(x.numel()));
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  TANDEM_CHECK(broadcast_shapes(shape, x.shape(), "sum_to") == x.shape(), "[sum_to] cannot sum ",
               shape_str(x.shape()), " to ", shape_str(shape));
  const size_t lead = x.shape().size() - shape.size();
  std::vector<int64_t> dims;
  for (size_t i = 0; i < x.shape().size(); ++i) {
    if (i < lead || (shape[i - lead] == 1 && x.shape()[i] != 1))
      dims.push_back(static_cast<int64_t>(i));
  }
  return sum(x, dims, true).reshape(shape);
}

Tensor argmax(const Tensor& x) {
  const profiler::RecordScope scope("argmax");
  ops::check_dtype("argmax", "input", x, DType::Float32);
  ops::check_dim("argmax", "input", x, 2);
  TANDEM_CHECK(x.size(1) > 0, "[argmax] rows are empty (shape ", shape_str(x.shape()), ")");
  Tensor out = empty({x.size(0)}, {.dtype = DType::Int64, .device = x.device()});
  backend_for(x.device()).argmax_rows(x.detach().contiguous(), out);
  return out;
}

}  // namespace tandem
