#pragma once
/// torch.nn.BatchNorm2d: affine, running statistics as buffers (running_mean, running_var,
/// num_batches_tracked).

#include "nn/module.h"
#include "nn/sync_batch_norm.h"

namespace tandem::nn {

struct BatchNorm2dConfig {
  int64_t channels = 0;
  float momentum = 0.1f;
  float eps = 1e-5f;
};

class BatchNorm2d final : public Module {
 public:
  explicit BatchNorm2d(const BatchNorm2dConfig& config);
  Tensor forward(const Tensor& input) override;
  /// relu(forward(input)), fused into one pass where the backend can (batch_norm2d's
  /// fuse_relu): what a ResNet's conv -> bn -> relu calls.
  Tensor forward_relu(const Tensor& input);
  /// relu(forward(input) + residual), fused into one pass where the backend can
  /// (batch_norm2d_add_relu): a ResNet block's bn2, shortcut sum and ReLU.
  Tensor forward_add_relu(const Tensor& input, const Tensor& residual);
  std::string describe() const override {
    return std::string(reducer_ ? "SyncBatchNorm2d(" : "BatchNorm2d(") +
           std::to_string(config_.channels) + ")";
  }

  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }
  const Tensor& running_mean() const { return running_mean_; }
  const Tensor& running_var() const { return running_var_; }
  const Tensor& num_batches_tracked() const { return num_batches_tracked_; }

  /// With a reducer, training uses the statistics of every rank's batch (Note [Synchronised
  /// batch norm]); parallel::convert_sync_batchnorm() sets it. nullptr: this rank's batch only.
  void set_statistics_reducer(std::shared_ptr<StatisticsReducer> reducer) {
    reducer_ = std::move(reducer);
  }
  bool is_synchronised() const { return reducer_ != nullptr; }

 protected:
  std::shared_ptr<Module> make_twin() const override {
    return std::make_shared<BatchNorm2d>(config_);
  }
  void reset_own_parameters(Generator& generator) override;

 private:
  /// residual: undefined, or added before the ReLU (relu then true).
  Tensor normalize(const Tensor& input, bool relu, const Tensor& residual);
  BatchNorm2dConfig config_;
  Tensor weight_;
  Tensor bias_;
  Tensor running_mean_;
  Tensor running_var_;
  Tensor num_batches_tracked_;
  std::shared_ptr<StatisticsReducer> reducer_;
};

}  // namespace tandem::nn
