#pragma once
/// 2-D convolution (cross-correlation, as torch.nn.functional.conv2d).

#include "engine/backend/op_options.h"
#include "engine/tensor.h"

namespace tandem {

/// x: (N, C, H, W), weight: (K, C, R, S), bias: (K) or undefined → (N, K, P, Q) with
/// P = (H + 2 * padding - R) / stride + 1 (likewise Q).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const Conv2dOptions& options = {});

}  // namespace tandem
