#include "nn/conv2d.h"

#include <cmath>

#include "engine/ops/cast.h"
#include "engine/ops/conv.h"
#include "engine/ops/factory.h"
#include "nn/init.h"

namespace tandem::nn {

Conv2d::Conv2d(const Conv2dConfig& config) : config_(config) {
  TANDEM_CHECK(config.in_channels > 0 && config.out_channels > 0 && config.kernel_size > 0,
               "[Conv2d] channels and kernel size must be positive");
  weight_ = register_parameter("weight", zeros({config.out_channels, config.in_channels,
                                                config.kernel_size, config.kernel_size}));
  if (config.bias) bias_ = register_parameter("bias", zeros({config.out_channels}));
  initialise_by_default();
}

Tensor Conv2d::forward(const Tensor& input) {
  const DType dtype = compute_dtype(precision());
  return conv2d(cast(input, dtype), cast(weight_, dtype), bias_,
                {.stride = config_.stride, .padding = config_.padding});
}

std::string Conv2d::describe() const {
  return "Conv2d(" + std::to_string(config_.in_channels) + ", " +
         std::to_string(config_.out_channels) + ", kernel=" + std::to_string(config_.kernel_size) +
         ", stride=" + std::to_string(config_.stride) +
         ", padding=" + std::to_string(config_.padding) + (config_.bias ? "" : ", bias=false") +
         ")";
}

void Conv2d::reset_own_parameters(Generator& generator) {
  init::pytorch_default_weight_(weight_, generator);
  if (bias_.defined()) {
    init::uniform_(bias_, 1.0f / std::sqrt(static_cast<float>(init::fan_in(weight_))), generator);
  }
}

}  // namespace tandem::nn
