#include "engine/ops/cast.h"

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

}  // namespace tandem
