#pragma once
/// torch.optim.SGD over a module's parameters: momentum, dampening, Nesterov and
/// weight decay, fused in-place updates of all the parameters of a device at once (engine
/// sgd_step_multi; one kernel launch per chunk of parameters on CUDA).

#include <vector>

#include "engine/ops/optim.h"
#include "nn/module.h"
#include "nn/optimizer.h"

namespace tandem::nn {

struct SgdConfig {
  float lr = 0.1f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
  /// Skip weight decay for 1-D parameters (BatchNorm weights and biases, all biases): a common
  /// choice for ResNets; off by default, as in PyTorch.
  bool no_decay_for_bn_and_bias = false;
};

/// The options of one parameter's step under `config` (the rule nn::Sgd and
/// parallel::ShardedSgd both step by): no weight decay for a 1-D parameter under
/// no_decay_for_bn_and_bias; `first_step` when its momentum buffer does not exist yet.
SgdStepOptions step_options(const SgdConfig& config, const Tensor& parameter, bool first_step);
/// Steps with these options can share one sgd_step_multi call (the rest of the options come
/// from one config).
bool same_step(const SgdStepOptions& a, const SgdStepOptions& b);

class Sgd final : public Optimizer {
 public:
  Sgd(std::vector<Tensor> parameters, const SgdConfig& config);

  /// Updates every parameter that has a gradient; parameters without one are left alone.
  /// One sgd_step_multi call per device and set of options.
  void step() override;
  /// The parameters' defined gradients, in parameter order.
  std::vector<Tensor> gradients() const override;
  /// Drops gradients (set to none).
  void zero_grad() override;

  float lr() const override { return config_.lr; }
  void set_lr(float lr) override;
  /// Bytes of the momentum buffers defined so far.
  size_t state_bytes() const override;
  const SgdConfig& config() const { return config_; }
  const std::vector<Tensor>& parameters() const { return parameters_; }
  /// Momentum buffers, one per parameter (undefined until the parameter's first step).
  const std::vector<Tensor>& momentum_buffers() const { return buffers_; }
  std::vector<Tensor>& mutable_momentum_buffers() { return buffers_; }

 private:
  SgdConfig config_;
  std::vector<Tensor> parameters_;
  std::vector<Tensor> buffers_;
};

}  // namespace tandem::nn
