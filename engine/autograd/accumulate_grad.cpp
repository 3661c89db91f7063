#include "engine/autograd/accumulate_grad.h"

#include "engine/ops/elementwise.h"
#include "engine/tensor_impl.h"

namespace tandem::autograd {

AccumulateGrad::AccumulateGrad(const Tensor& leaf) : Node(leaf.device(), {}), leaf_(leaf) {}

namespace {

// A gradient that nobody else references, in the leaf's memory format (PyTorch keeps .grad in
// its parameter's format), can become .grad without a copy.
bool can_steal(const Tensor& grad, MemoryFormat format) {
  return grad.impl() != nullptr && grad.is_contiguous(format) && grad.storage().use_count() == 1 &&
         (grad.impl()->autograd() == nullptr || !grad.requires_grad());
}

}  // namespace

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>& grad_outputs) {
  Tensor incoming = std::move(grad_outputs.at(0));
  if (!incoming.defined()) return {};
  TANDEM_CHECK(incoming.shape() == leaf_.shape() && incoming.device() == leaf_.device(),
               "[autograd] gradient of shape ", shape_str(incoming.shape()), " on ",
               incoming.device(), " for a leaf of shape ", shape_str(leaf_.shape()), " on ",
               leaf_.device());
  AutogradMeta& meta = leaf_.impl()->mutable_autograd();
  if (!meta.grad.defined()) {
    const MemoryFormat format = leaf_.memory_format();
    if (can_steal(incoming, format)) {
      meta.grad = incoming.detach();
    } else if (incoming.is_contiguous(format)) {
      meta.grad = incoming.detach().clone();
    } else {
      meta.grad = incoming.detach().contiguous(format);
    }
  } else {
    add_(meta.grad, incoming);
  }
  std::vector<std::pair<int, Tensor::PostAccumulateGradHook>> hooks;
  {
    std::lock_guard lock(meta.mutex);
    hooks = meta.post_accumulate_hooks;
  }
  for (auto& [id, hook] : hooks) hook(leaf_);
  return {};
}

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf) {
  TANDEM_CHECK(leaf.requires_grad() && leaf.is_leaf(),
               "[autograd] grad_accumulator needs a leaf that requires grad");
  AutogradMeta& meta = leaf.impl()->mutable_autograd();
  std::lock_guard lock(meta.mutex);
  if (auto existing = meta.grad_accumulator.lock()) return existing;
  auto node = std::make_shared<AccumulateGrad>(leaf);
  meta.grad_accumulator = node;
  return node;
}

}  // namespace tandem::autograd
