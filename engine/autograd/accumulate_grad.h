#pragma once
/// AccumulateGrad: the sink node of a leaf tensor. It adds the incoming
/// gradient into leaf.grad() and then runs the leaf's post-accumulate hooks
/// (DDP's Reducer marks the parameter ready there).

#include <cstdint>
#include <memory>

#include "engine/autograd/node.h"

namespace tandem::autograd {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const Tensor& leaf);
  std::vector<Tensor> apply(std::vector<Tensor>& grad_outputs) override;
  std::string name() const override { return "AccumulateGrad"; }
  /// Note [Accumulate first]: a leaf's accumulator is shared by every graph that uses the leaf,
  /// so its sequence number dates from the first of them; ordered by it, it would wait behind
  /// the whole rest of a later backward pass. Accumulating (and firing DDP's hooks) as soon as
  /// a gradient is complete is what lets the Reducer overlap, so it runs before anything else,
  /// as in PyTorch.
  uint64_t priority() const override { return UINT64_MAX; }

 private:
  // Strong, as in PyTorch: the leaf holds this node only weakly, so there is no cycle.
  Tensor leaf_;
};

/// The accumulator of a leaf that requires grad, created on first use and then shared.
std::shared_ptr<Node> grad_accumulator(const Tensor& leaf);

}  // namespace tandem::autograd
