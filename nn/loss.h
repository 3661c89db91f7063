#pragma once
/// Loss modules. They hold options only; the work is the engine's fused op.

#include "engine/ops/loss.h"
#include "engine/tensor.h"

namespace tandem::nn {

/// torch.nn.CrossEntropyLoss (mean reduction): logits (N, K), int64 labels (N) → ().
class CrossEntropyLoss {
 public:
  Tensor operator()(const Tensor& logits, const Tensor& labels) const {
    return cross_entropy(logits, labels);
  }
};

}  // namespace tandem::nn
