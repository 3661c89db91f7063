#pragma once
/// torch.nn.Linear.

#include "engine/ops/matmul.h"
#include "nn/module.h"

namespace tandem::nn {

struct LinearConfig {
  int64_t in_features = 0;
  int64_t out_features = 0;
  bool bias = true;
};

class Linear final : public Module {
 public:
  explicit Linear(const LinearConfig& config);
  /// In bfloat16 precision the input and weight meet in bfloat16 and the output is float32.
  Tensor forward(const Tensor& input) override;
  std::string describe() const override;

  const Tensor& weight() const { return weight_; }  ///< (out, in)
  const Tensor& bias() const { return bias_; }

 protected:
  std::shared_ptr<Module> make_twin() const override { return std::make_shared<Linear>(config_); }
  void reset_own_parameters(Generator& generator) override;

 private:
  LinearConfig config_;
  Tensor weight_;
  Tensor bias_;
};

}  // namespace tandem::nn
