#pragma once
/// Softmax, loss and accuracy for classification logits (N, K).

#include "engine/tensor.h"

namespace tandem {

/// log(softmax(x)) along dim 1.
Tensor log_softmax(const Tensor& x);
/// Mean negative log-likelihood of the int64 labels (N) under softmax(logits): shape ().
/// Fused (one kernel forward, one backward), as torch's F.cross_entropy.
Tensor cross_entropy(const Tensor& logits, const Tensor& labels);
/// Number of rows whose argmax equals the label, as a () float32 tensor on the logits' device
/// (no host synchronisation until the caller reads it).
Tensor count_correct(const Tensor& logits, const Tensor& labels);

}  // namespace tandem
