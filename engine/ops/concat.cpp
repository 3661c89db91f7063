#include "engine/ops/concat.h"

#include "engine/autograd/node.h"
#include "engine/ops/factory.h"
#include "engine/profiler.h"

namespace tandem {

Tensor cat(const std::vector<Tensor>& tensors) {
  const profiler::RecordScope scope("cat");
  TANDEM_CHECK(!tensors.empty(), "[cat] needs at least one tensor");
  const Tensor& first = tensors.front();
  TANDEM_CHECK(first.dim() >= 1, "[cat] needs tensors with at least one dimension");
  Shape shape = first.shape();
  shape[0] = 0;
  std::vector<int64_t> row_starts;
  std::vector<const Tensor*> inputs;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TANDEM_CHECK(t.dtype() == first.dtype() && t.device() == first.device(), "[cat] tensor ", i,
                 " is ", dtype_name(t.dtype()), " on ", t.device(), ", tensor 0 is ",
                 dtype_name(first.dtype()), " on ", first.device());
    TANDEM_CHECK(t.dim() == first.dim() &&
                     std::equal(t.shape().begin() + 1, t.shape().end(), first.shape().begin() + 1),
                 "[cat] tensor ", i, " has shape ", shape_str(t.shape()),
                 ", which differs from tensor 0's ", shape_str(first.shape()),
                 " beyond dimension 0");
    row_starts.push_back(shape[0]);
    shape[0] += t.size(0);
    inputs.push_back(&t);
  }
  row_starts.push_back(shape[0]);

  Tensor out = empty(shape, {.dtype = first.dtype(), .device = first.device()});
  for (size_t i = 0; i < tensors.size(); ++i) {
    Tensor rows = out.slice(row_starts[i], row_starts[i + 1]);
    rows.copy_(tensors[i]);
  }
  autograd::record("cat", inputs, {&out},
                   [row_starts](const std::vector<Tensor>& grads, const std::vector<bool>& needed) {
                     std::vector<Tensor> grad_inputs(needed.size());
                     for (size_t i = 0; i < needed.size(); ++i) {
                       if (needed[i])
                         grad_inputs[i] = grads[0].slice(row_starts[i], row_starts[i + 1]);
                     }
                     return grad_inputs;
                   });
  return out;
}

}  // namespace tandem
