#pragma once
/// Bodies of the training batch norm's backward (batch_norm.cu), the three steps of Note
/// [Batch-norm kernels] in batch_norm.h: partials of Σg and Σg * (x - mean) per chunk of a
/// channel, their finalize per channel, grad_x over the full grid. g is grad_y, or, for the
/// fused batch norm + ReLU, grad_y, or 0 where the forward's output y is 0 or less (a NaN y passes
/// it, as ReLU's backward).
///
/// grad_x = gamma * inv_std * (g - mean(g) - x_hat * mean(g * x_hat)) with x_hat = (x - mean) *
/// inv_std, so x_hat * mean(g * x_hat) = (x - mean) * Σg(x - mean) * inv_std² / count: per
/// channel, grad_x needs mean(g) and that projection factor besides the forward's statistics.

#include <cmath>
#include <cstdint>

#include "engine/cuda/kernels/batch_norm.h"
#include "engine/cuda/kernels/norm_plan.h"
#include "engine/cuda/kernels/norm_walk.h"
#include "engine/cuda/kernels/types.h"
#include "engine/host_device.h"

namespace tandem::cuda::kernels {

/// The gradient batch norm sees: grad_y, zeroed where y <= 0 when y (the fused ReLU's output) is
/// given.
template <int V, typename T>
TANDEM_HD inline float masked_gradient(const Pack<T, V>& grad_y, const Pack<T, V>& y, bool relu,
                                       int k) {
  return relu && widen(y.v[k]) <= 0.0f ? 0.0f : widen(grad_y.v[k]);
}

/// Block (c, split) of the backward's statistics kernel: grad_y, x and y (or null): (N, C, HW)
/// → partials[c * splits + split] = {Σg, Σg * (x - mean)} over the chunk; save_mean: (C);
/// partials: (C, splits, 2).
template <int V, typename Block, typename T>
TANDEM_HD void batch_norm_backward_statistics_block(Block& block, int64_t c, int64_t split,
                                                    const NormPlan& plan, const T* grad_y,
                                                    const T* y, const T* x, const NormShape& s,
                                                    const float* save_mean, float* partials) {
  const int64_t begin = split * plan.chunk;
  const int64_t end = min_of(begin + plan.chunk, plan.packs);
  const int64_t first = begin + block.thread();
  const float mean = save_mean[c];
  const bool relu = y != nullptr;
  float sum_grad = 0.0f;
  float sum_dot = 0.0f;
  ChannelWalk walk(s, V, c, first, kNormBlock);
  for (int64_t j = first; j < end; j += kNormBlock, walk.advance()) {
    const Pack<T, V> g = load_pack<V>(grad_y + walk.offset);
    const Pack<T, V> xs = load_pack<V>(x + walk.offset);
    const Pack<T, V> ys = relu ? load_pack<V>(y + walk.offset) : g;
    for (int k = 0; k < V; ++k) {
      const float grad = masked_gradient(g, ys, relu, k);
      sum_grad += grad;
      sum_dot += grad * (widen(xs.v[k]) - mean);
    }
  }
  const float block_grad = block.sum(sum_grad);
  block.sync();  // the reduction's storage is reused
  const float block_dot = block.sum(sum_dot);
  if (block.thread() == 0) {
    float* out = partials + (c * plan.splits + split) * 2;
    out[0] = block_grad;
    out[1] = block_dot;
  }
}

/// One thread per channel c < n = C: the partials of batch_norm_backward_statistics_block →
/// grad_beta = Σg, grad_gamma = Σg * x_hat: (C), and coefficients: (C, 2) = {mean(g), the
/// projection factor Σg(x - mean) * inv_std² / count} for the grad_x kernel.
struct BatchNormBackwardFinalizeBody {
  const float* partials;  // (C, splits, 2)
  NormPlan plan;
  const float* save_inv_std;
  float* grad_gamma;
  float* grad_beta;
  float* coefficients;
  int64_t n;
  TANDEM_HD void operator()(int64_t c) const {
    const float* own = partials + c * plan.splits * 2;
    double sum_grad = 0.0;
    double sum_dot = 0.0;
    for (int64_t k = 0; k < plan.splits; ++k) {
      sum_grad += own[k * 2];
      sum_dot += own[k * 2 + 1];
    }
    const double inv_std = save_inv_std[c];
    const auto count = static_cast<double>(plan.packs * plan.pack);
    grad_beta[c] = static_cast<float>(sum_grad);
    grad_gamma[c] = static_cast<float>(sum_dot * inv_std);
    coefficients[c * 2] = static_cast<float>(sum_grad / count);
    coefficients[c * 2 + 1] = static_cast<float>(sum_dot * inv_std * inv_std / count);
  }
};

/// Thread `thread` of the `threads` of a full grid: grad_x = gamma * inv_std * (g - mean(g) -
/// (x - mean) * projection) over packs thread, thread + threads, ... of grad_y, y (or null), x,
/// grad_x: (N, C, HW); gamma, save_mean, save_inv_std: (C); coefficients: (C, 2) from
/// BatchNormBackwardFinalizeBody. grad_residual (or null; with y): (N, C, HW) ← g, the gradient of
/// the residual that the fused forward added before its ReLU, stored where g is at hand.
template <int V, typename T>
TANDEM_HD void batch_norm_grad_x_packs(int64_t thread, int64_t threads, const T* grad_y, const T* y,
                                       const T* x, const NormShape& s, const float* gamma,
                                       const float* save_mean, const float* save_inv_std,
                                       const float* coefficients, T* grad_x, T* grad_residual) {
  const int64_t packs = s.n * s.c * s.hw / V;
  const bool relu = y != nullptr;
  TensorWalk walk(s, V, thread, threads);
  for (int64_t i = thread; i < packs; i += threads, walk.advance()) {
    const int64_t c = walk.channel;
    const float factor = gamma[c] * save_inv_std[c];
    const float mean = save_mean[c];
    const float mean_grad = coefficients[c * 2];
    const float projection = coefficients[c * 2 + 1];
    const Pack<T, V> g = load_pack<V>(grad_y + i * V);
    const Pack<T, V> xs = load_pack<V>(x + i * V);
    const Pack<T, V> ys = relu ? load_pack<V>(y + i * V) : g;
    Pack<T, V> out;
    Pack<T, V> masked;
    for (int k = 0; k < V; ++k) {
      const float centred = widen(xs.v[k]) - mean;
      const float grad = masked_gradient(g, ys, relu, k);
      out.v[k] = narrow<T>(factor * (grad - mean_grad - centred * projection));
      masked.v[k] = narrow<T>(grad);  // exact: a value of T or 0
    }
    store_pack<V>(grad_x + i * V, out);
    if (grad_residual != nullptr) store_pack<V>(grad_residual + i * V, masked);
  }
}

}  // namespace tandem::cuda::kernels
