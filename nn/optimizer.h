#pragma once
/// Optimizer: what a training loop asks of an optimizer, as torch.optim.Optimizer's step(),
/// zero_grad() and learning rate. nn::Sgd is one; parallel::ShardedSgd (sharded data parallel,
/// each rank stepping its part of the model) is another.

#include <cstddef>

namespace tandem::nn {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// Updates the parameters from their gradients.
  virtual void step() = 0;
  /// Drops the gradients (set to none), so the next backward starts afresh.
  virtual void zero_grad() = 0;
  virtual float lr() const = 0;
  virtual void set_lr(float lr) = 0;
  /// Bytes of state this process holds (momentum buffers), for memory accounting.
  virtual size_t state_bytes() const = 0;
};

}  // namespace tandem::nn
