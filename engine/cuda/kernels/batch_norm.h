#pragma once
/// Bodies of Tandem's own batch-norm kernels (batch_norm.cu), which the CUDA backend runs for
/// bfloat16 activations and for the fused batch norm + ReLU (Note [Own batch-norm kernels] in
/// engine/cuda/batch_norm.cpp). x, y and their gradients are T (float or bfloat16: Note
/// [Element types] in types.h); gamma, beta, the statistics and their gradients are float32, and
/// every sum is accumulated in float32.
///
/// Training forward and backward give one block of kNormBlock threads to a channel (block-stride
/// over channels): the block sums the channel's N * HW values, thread 0 shares the total through
/// `broadcast` (shared memory, two floats), and the block then writes the channel's outputs.
/// Statistics are two-pass (mean, then the mean squared deviation), as the CPU backend's are.
/// Templates on a block policy (Note [Block policy] in block.h).

#include <cmath>
#include <cstdint>

#include "engine/cuda/kernels/block.h"
#include "engine/cuda/kernels/grid.h"
#include "engine/cuda/kernels/types.h"
#include "engine/host_device.h"

namespace tandem::cuda::kernels {

constexpr int kNormBlock = 256;

/// The offset of the j-th value (j < N * HW) of channel c in an (N, C, HW) tensor.
TANDEM_HD inline int64_t channel_offset(const NormShape& s, int64_t c, int64_t j) {
  return ((j / s.hw) * s.c + c) * s.hw + j % s.hw;
}

/// The sum of `value` over the block, for every thread: thread 0 stores it in *slot, then sync.
template <typename Block>
TANDEM_HD float share_sum(Block& block, float value, float* slot) {
  const float total = block.sum(value);
  if (block.thread() == 0) *slot = total;
  block.sync();
  return *slot;
}

/// x, y: (N, C, HW) → y = gamma * (x - mean) / sqrt(var + eps) + beta per channel, then
/// max(y, 0) when `relu`; save_mean, save_var: (C) the batch mean and biased variance.
template <typename Block, typename T>
TANDEM_HD void batch_norm_forward_channels(Block& block, float* broadcast, int64_t block_index,
                                           int64_t blocks, const T* x, const NormShape& s,
                                           const float* gamma, const float* beta, float eps,
                                           bool relu, T* y, float* save_mean, float* save_var) {
  const int64_t count = s.n * s.hw;
  for (int64_t c = block_index; c < s.c; c += blocks) {
    float local = 0.0f;
    for (int64_t j = block.thread(); j < count; j += kNormBlock) {
      local += widen(x[channel_offset(s, c, j)]);
    }
    const float mean = share_sum(block, local, &broadcast[0]) / static_cast<float>(count);
    float local_squares = 0.0f;
    for (int64_t j = block.thread(); j < count; j += kNormBlock) {
      const float d = widen(x[channel_offset(s, c, j)]) - mean;
      local_squares += d * d;
    }
    const float var = share_sum(block, local_squares, &broadcast[1]) / static_cast<float>(count);
    const float scale = gamma[c] / sqrtf(var + eps);
    for (int64_t j = block.thread(); j < count; j += kNormBlock) {
      const int64_t at = channel_offset(s, c, j);
      const float v = (widen(x[at]) - mean) * scale + beta[c];
      y[at] = narrow<T>(relu ? fmaxf(v, 0.0f) : v);
    }
    if (block.thread() == 0) {
      save_mean[c] = mean;
      save_var[c] = var;
    }
    block.sync();  // broadcast and the reduction storage are reused for the next channel
  }
}

/// grad_y, x, grad_x: (N, C, HW); y: the fused ReLU's output (N, C, HW), or null without ReLU
/// (batch norm then sees grad_y where y > 0, else 0). grad_gamma, grad_beta: (C).
template <typename Block, typename T>
TANDEM_HD void batch_norm_backward_channels(Block& block, float* broadcast, int64_t block_index,
                                            int64_t blocks, const T* grad_y, const T* y, const T* x,
                                            const NormShape& s, const float* gamma,
                                            const float* save_mean, const float* save_var,
                                            float eps, T* grad_x, float* grad_gamma,
                                            float* grad_beta) {
  const int64_t count = s.n * s.hw;
  const auto grad_at = [&](int64_t at) {
    return y != nullptr && !(widen(y[at]) > 0.0f) ? 0.0f : widen(grad_y[at]);
  };
  for (int64_t c = block_index; c < s.c; c += blocks) {
    const float mean = save_mean[c];
    const float inv_std = 1.0f / sqrtf(save_var[c] + eps);
    float local_grad = 0.0f;
    float local_dot = 0.0f;  // sum of grad * (x - mean)
    for (int64_t j = block.thread(); j < count; j += kNormBlock) {
      const int64_t at = channel_offset(s, c, j);
      const float g = grad_at(at);
      local_grad += g;
      local_dot += g * (widen(x[at]) - mean);
    }
    const float sum_grad = share_sum(block, local_grad, &broadcast[0]);
    const float sum_dot = share_sum(block, local_dot, &broadcast[1]);
    // grad_x = gamma * inv_std * (g - mean(g) - x_hat * mean(g * x_hat)), x_hat = (x - mean) *
    // inv_std, so x_hat * mean(g * x_hat) = (x - mean) * sum_dot * inv_std² / count.
    const float factor = gamma[c] * inv_std;
    const float mean_grad = sum_grad / static_cast<float>(count);
    const float projection = sum_dot * inv_std * inv_std / static_cast<float>(count);
    for (int64_t j = block.thread(); j < count; j += kNormBlock) {
      const int64_t at = channel_offset(s, c, j);
      const float centred = widen(x[at]) - mean;
      grad_x[at] = narrow<T>(factor * (grad_at(at) - mean_grad - centred * projection));
    }
    if (block.thread() == 0) {
      grad_beta[c] = sum_grad;
      grad_gamma[c] = sum_dot * inv_std;
    }
    block.sync();
  }
}

/// x, y: (N, C, HW) → y = gamma * (x - running_mean) / sqrt(running_var + eps) + beta per
/// channel; n = N * C * HW
template <typename T = float>
struct BatchNormInferenceBody {
  const T* x;
  NormShape s;
  const float* gamma;
  const float* beta;
  const float* running_mean;
  const float* running_var;
  float eps;
  T* y;
  int64_t n;
  TANDEM_HD void operator()(int64_t i) const {
    const int64_t c = (i / s.hw) % s.c;
    const float scale = gamma[c] / sqrtf(running_var[c] + eps);
    y[i] = narrow<T>((widen(x[i]) - running_mean[c]) * scale + beta[c]);
  }
};

}  // namespace tandem::cuda::kernels
