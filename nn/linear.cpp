#include "nn/linear.h"

#include <cmath>

#include "engine/ops/cast.h"
#include "engine/ops/factory.h"
#include "nn/init.h"

namespace tandem::nn {

Linear::Linear(const LinearConfig& config) : config_(config) {
  TANDEM_CHECK(config.in_features > 0 && config.out_features > 0,
               "[Linear] feature counts must be positive");
  weight_ = register_parameter("weight", zeros({config.out_features, config.in_features}));
  if (config.bias) bias_ = register_parameter("bias", zeros({config.out_features}));
  initialise_by_default();
}

Tensor Linear::forward(const Tensor& input) {
  const DType dtype = compute_dtype(precision());
  return linear(cast(input, dtype), cast(weight_, dtype), bias_);
}

std::string Linear::describe() const {
  return "Linear(" + std::to_string(config_.in_features) + ", " +
         std::to_string(config_.out_features) + ")";
}

void Linear::reset_own_parameters(Generator& generator) {
  init::pytorch_default_weight_(weight_, generator);
  if (bias_.defined()) {
    init::uniform_(bias_, 1.0f / std::sqrt(static_cast<float>(config_.in_features)), generator);
  }
}

}  // namespace tandem::nn
