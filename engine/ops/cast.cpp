#include "engine/ops/cast.h"

#include "engine/autograd/node.h"
#include "engine/backend.h"
#include "engine/ops/factory.h"
#include "engine/ops/layout.h"

namespace tandem {
namespace {

// Casting is elementwise, so a dense tensor is cast in its own memory order (its kernel view)
// and the result keeps the format: no transpose on the way in or back.
Tensor cast_dense(const Tensor& x, DType dtype) {
  const MemoryFormat format = x.dim() == 4 ? x.memory_format() : MemoryFormat::Contiguous;
  const Tensor source = x.detach().contiguous(format);
  Tensor out = empty(x.shape(), {.dtype = dtype, .device = x.device(), .memory_format = format});
  Tensor out_view = ops::kernel_view(out);
  backend_for(x.device()).cast(ops::kernel_view(source), out_view);
  return out;
}

}  // namespace

Tensor cast(const Tensor& x, DType dtype) {
  TANDEM_CHECK(x.defined(), "[cast] input is an undefined tensor");
  if (x.dtype() == dtype) return x;
  Tensor out = cast_dense(x, dtype);
  autograd::record(
      "cast", {&x}, {&out},
      [source = x.dtype()](const std::vector<Tensor>& grads, const std::vector<bool>&) {
        return std::vector<Tensor>{cast_dense(grads[0], source)};
      });
  return out;
}

}  // namespace tandem
