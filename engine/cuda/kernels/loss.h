#pragma once
/// Bodies of the per-element loss kernels (loss.cu). Note [Kernel bodies] in grid.h.

#include <cmath>
#include <cstdint>

#include "engine/host_device.h"

namespace tandem::cuda::kernels {

/// grad_loss: (), log_probs, grad_logits: (rows, cols), labels: (rows); n = rows * cols.
/// grad_logits = grad_loss * (softmax - onehot(labels)) / rows.
struct CrossEntropyBackwardBody {
  const float* grad_loss;
  const float* log_probs;
  const int64_t* labels;
  int64_t rows, cols;
  float* grad_logits;
  int64_t n;
  TANDEM_HD void operator()(int64_t i) const {
    const float scale = *grad_loss / static_cast<float>(rows);
    const int64_t row = i / cols;
    float g = expf(log_probs[i]) * scale;
    if (i - row * cols == labels[row]) g -= scale;
    grad_logits[i] = g;
  }
};

}  // namespace tandem::cuda::kernels
