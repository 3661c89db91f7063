#include "nn/init.h"

#include <cmath>

#include "engine/ops/factory.h"

namespace tandem::nn::init {
namespace {

int64_t receptive_field(const Tensor& weight) {
  int64_t size = 1;
  for (int64_t d = 2; d < weight.dim(); ++d) size *= weight.size(d);
  return size;
}

}  // namespace

int64_t fan_in(const Tensor& weight) {
  return weight.size(1) * receptive_field(weight);
}
int64_t fan_out(const Tensor& weight) {
  return weight.size(0) * receptive_field(weight);
}

void uniform_(const Tensor& tensor, float bound, Generator& generator) {
  Tensor target = tensor;
  target.copy_(uniform(tensor.shape(), -bound, bound, generator, {.device = tensor.device()}));
}

void normal_(const Tensor& tensor, float stddev, Generator& generator) {
  Tensor target = tensor;
  target.copy_(randn(tensor.shape(), generator, {.device = tensor.device()}, 0.0f, stddev));
}

void pytorch_default_weight_(const Tensor& weight, Generator& generator) {
  // gain(leaky_relu, a=√5) = √(2 / (1 + 5)); bound = √3 · gain / √fan_in = 1 / √fan_in.
  uniform_(weight, 1.0f / std::sqrt(static_cast<float>(fan_in(weight))), generator);
}

void kaiming_normal_fan_out_(const Tensor& weight, Generator& generator) {
  normal_(weight, std::sqrt(2.0f / static_cast<float>(fan_out(weight))), generator);
}

}  // namespace tandem::nn::init
