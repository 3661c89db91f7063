#include "engine/ops/cast.h"

#include "engine/backend/backend.h"
#include "engine/ops/layout.h"
#include "engine/profiler.h"

#include "engine/autograd/node.h"

namespace tandem {

Tensor cast(const Tensor& x, DType dtype) {
  TANDEM_CHECK(x.defined(), "[cast] input is an undefined tensor");
  if (x.dtype() == dtype) return x;
  Tensor out = x.detach().to(dtype);
  autograd::record(
      "cast", {&x}, {&out},
      [source = x.dtype()](const std::vector<Tensor>& grads, const std::vector<bool>&) {
        return std::vector<Tensor>{grads[0].to(source)};
      });
  return out;
}

Tensor& cast_out(const Tensor& src, Tensor& out) {
  const profiler::RecordScope scope("cast_out");
  TANDEM_CHECK(src.defined() && out.defined(), "[cast_out] an undefined tensor");
  TANDEM_CHECK(src.shape() == out.shape(), "[cast_out] source ", shape_str(src.shape()),
               " and destination ", shape_str(out.shape()), " differ in shape");
  TANDEM_CHECK(src.device() == out.device(), "[cast_out] source on ", src.device(),
               ", destination on ", out.device());
  TANDEM_CHECK(out.is_dense(), "[cast_out] needs a contiguous or channels-last destination");
  const Tensor source = src.detach().contiguous(out.memory_format());
  Tensor out_view = ops::kernel_view(out);
  backend_for(out.device()).cast(ops::kernel_view(source), out_view);
  return out;
}

}  // namespace tandem
