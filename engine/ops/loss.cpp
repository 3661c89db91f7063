#include "engine/ops/loss.h"

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/node.h"
#include "engine/backend/backend.h"
#include "engine/ops/checks.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/factory.h"
#include "engine/ops/reduce.h"
#include "engine/profiler.h"

namespace tandem {
namespace {

using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

void check_logits_and_labels(const char* op, const Tensor& logits, const Tensor& labels) {
  ops::check_dtype(op, "logits", logits, DType::Float32);
  ops::check_dim(op, "logits", logits, 2);
  ops::check_dtype(op, "labels", labels, DType::Int64);
  ops::check_dim(op, "labels", labels, 1);
  ops::check_same_device(op, {&logits, &labels});
  TANDEM_CHECK(labels.size(0) == logits.size(0), "[", op, "] ", logits.size(0),
               " rows of logits but ", labels.size(0), " labels");
}

}  // namespace

Tensor log_softmax(const Tensor& x) {
  const profiler::RecordScope scope("log_softmax");
  ops::check_dtype("log_softmax", "input", x, DType::Float32);
  ops::check_dim("log_softmax", "input", x, 2);
  Tensor out = empty(x.shape(), {.device = x.device()});
  backend_for(x.device()).log_softmax_forward(x.detach().contiguous(), out);
  autograd::record("log_softmax", {&x}, {&out}, [y = out.detach()](const Grads& g, const Needs&) {
    Tensor grad_x = empty_like(y);
    backend_for(y.device()).log_softmax_backward(g[0].contiguous(), y, grad_x);
    return Grads{grad_x};
  });
  return out;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& labels) {
  const profiler::RecordScope scope("cross_entropy");
  check_logits_and_labels("cross_entropy", logits, labels);
  TANDEM_CHECK(logits.size(0) > 0, "[cross_entropy] empty batch");
  const Tensor saved_labels = labels.detach().contiguous();
  Tensor loss = empty({}, {.device = logits.device()});
  Tensor log_probs = empty(logits.shape(), {.device = logits.device()});
  backend_for(logits.device())
      .cross_entropy_forward(logits.detach().contiguous(), saved_labels, loss, log_probs);
  autograd::record(
      "cross_entropy", {&logits}, {&loss}, [log_probs, saved_labels](const Grads& g, const Needs&) {
        Tensor grad_logits = empty_like(log_probs);
        backend_for(log_probs.device())
            .cross_entropy_backward(g[0].contiguous(), log_probs, saved_labels, grad_logits);
        return Grads{grad_logits};
      });
  return loss;
}

Tensor count_correct(const Tensor& logits, const Tensor& labels) {
  check_logits_and_labels("count_correct", logits, labels);
  NoGradGuard no_grad;
  return sum(equal(argmax(logits), labels));
}

}  // namespace tandem
