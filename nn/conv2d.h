#pragma once
/// torch.nn.Conv2d (square kernels, no groups or dilation).

#include "nn/module.h"

namespace tandem::nn {

struct Conv2dConfig {
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t kernel_size = 3;
  int64_t stride = 1;
  int64_t padding = 0;
  bool bias = true;
};

class Conv2d final : public Module {
 public:
  explicit Conv2d(const Conv2dConfig& config);
  Tensor forward(const Tensor& input) override;
  std::string describe() const override;

  const Tensor& weight() const { return weight_; }  ///< (out, in, k, k)
  const Tensor& bias() const { return bias_; }      ///< (out) or undefined

 protected:
  std::shared_ptr<Module> make_twin() const override { return std::make_shared<Conv2d>(config_); }
  void reset_own_parameters(Generator& generator) override;

 private:
  Conv2dConfig config_;
  Tensor weight_;
  Tensor bias_;
};

}  // namespace tandem::nn
