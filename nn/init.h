#pragma once
/// Parameter initialisation, as torch.nn.init does it. All write in place.

#include <cstdint>

#include "engine/random.h"
#include "engine/tensor.h"

namespace tandem::nn::init {

/// Inputs per output unit: in_features for Linear, C·R·S for Conv2d (dim 1 × the rest).
int64_t fan_in(const Tensor& weight);
/// Outputs per input unit: out_features for Linear, K·R·S for Conv2d.
int64_t fan_out(const Tensor& weight);

void uniform_(const Tensor& tensor, float bound, Generator& generator);  ///< U(-bound, bound)
void normal_(const Tensor& tensor, float stddev, Generator& generator);  ///< N(0, stddev²)
/// The default of torch's Conv2d and Linear weights: kaiming_uniform_(a = √5) = U(±1/√fan_in).
void pytorch_default_weight_(const Tensor& weight, Generator& generator);
/// torchvision's ResNet conv init: kaiming_normal_(mode="fan_out", nonlinearity="relu").
void kaiming_normal_fan_out_(const Tensor& weight, Generator& generator);

}  // namespace tandem::nn::init
