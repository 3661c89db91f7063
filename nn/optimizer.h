#pragma once
/// Optimizer: what a training loop asks of an optimizer, as torch.optim.Optimizer's step(),
/// zero_grad() and learning rate. nn::Sgd is one; parallel::ShardedSgd (sharded data parallel,
/// each rank stepping its part of the model) is another.

#include <cstddef>
#include <vector>

#include "engine/tensor.h"

namespace tandem::nn {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// Updates the parameters from their gradients.
  virtual void step() = 0;
  /// The gradients step() would read now, as tensors sharing their memory (a gradient scaler
  /// unscales them in place): every defined gradient of a parameter, or under sharding this
  /// rank's part of the reduced gradients.
  virtual std::vector<Tensor> gradients() const = 0;
  /// Drops the gradients (set to none), so the next backward starts afresh.
  virtual void zero_grad() = 0;
  virtual float lr() const = 0;
  virtual void set_lr(float lr) = 0;
  /// Bytes of state this process holds (momentum buffers), for memory accounting.
  virtual size_t state_bytes() const = 0;
};

}  // namespace tandem::nn
