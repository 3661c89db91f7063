#pragma once
/// AccumulateGrad: the sink node of a leaf tensor. It adds the incoming
/// gradient into leaf.grad() and then runs the leaf's post-accumulate hooks
/// (DDP's Reducer marks the parameter ready there).

#include <memory>

#include "engine/autograd/node.h"

namespace tandem::autograd {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const Tensor& leaf);
  std::vector<Tensor> apply(std::vector<Tensor>& grad_outputs) override;
  std::string name() const override { return "AccumulateGrad"; }

 private:
  // Strong, as in PyTorch: the leaf holds this node only weakly, so there is no cycle.
  Tensor leaf_;
};

/// The accumulator of a leaf that requires grad, created on first use and then shared.
std::shared_ptr<Node> grad_accumulator(const Tensor& leaf);

}  // namespace tandem::autograd
