#pragma once
/// Bodies of Tandem's own batch-norm kernels (batch_norm.cu), which the CUDA backend runs for
/// bfloat16 activations and for the fused batch norm + ReLU, with or without a residual (Note [Own
/// batch-norm kernels] in engine/cuda/batch_norm.cpp): the training forward and inference here, the
/// backward in batch_norm_backward.h. x, y and their gradients are T (float or bfloat16: Note
/// [Element types] in types.h); gamma, beta, the statistics and their gradients are float32.
///
/// Note [Batch-norm kernels]
/// A channel's N * HW values are spread over the GPU, not given to one block: ResNet-20's first
/// stage has 16 channels, and 16 blocks would leave most of an H100's 132 multiprocessors idle.
/// The training forward is three kernels:
///   1. statistics, grid (C, splits) of kNormBlock threads: block (c, k) takes the k-th chunk of
///      channel c's values (norm_plan.h sizes the chunks: four blocks per multiprocessor, at
///      least one pack per thread) and writes two partials, the chunk's sum and its sum of
///      squared deviations from the chunk's own mean (two passes over the chunk, the second
///      from cache);
///   2. finalize, one thread per channel: adds the partials in a fixed order, in double, with
///      Chan's formula (M2 = Σ M2_k + Σ n_k (mean_k - mean)²), and writes the mean, 1 /
///      sqrt(var + eps) and the running statistics (Note [Running statistics] in
///      engine/running_statistics.h);
///   3. normalize, a full grid over the tensor: y = (x - mean) * (gamma * inv_std) + beta, with
///      the ReLU when fused (and the residual added before it, when given).
/// The backward is the same three steps (batch_norm_backward.h): partials of Σg and
/// Σg * (x - mean), their finalize into grad_gamma, grad_beta and two coefficients per channel,
/// then grad_x (and the residual's gradient, the masked g) over the full grid.
///
/// Why these numerics: the statistics stay two-pass, as they were with one block per channel and
/// as the CPU backend's are, so a large mean does not cancel against the squares; Welford's
/// update would do as well but divides once per value. The partials of a chunk are float32 sums
/// of at most a few hundred values per thread; their combination is exact algebra in double. No
/// atomics anywhere: a given shape on a given GPU gives the same bits on every run (the chunks
/// depend on the multiprocessor count, so another GPU model may round differently).
///
/// Why no division per value: a chunk is walked in the order of memory, n outer and hw inner, by
/// ChannelWalk (norm_walk.h), which divides once per thread and then only adds and compares; the
/// full-grid kernels track each pack's channel the same way (TensorWalk). Rows of HW values are
/// read in packs of 16 bytes (8 bfloat16 values) where HW and the pointers allow it
/// (norm_pack), else one value at a time; both widths are instantiated and tested.

#include <cmath>
#include <cstdint>

#include "engine/cuda/kernels/block.h"
#include "engine/cuda/kernels/grid.h"
#include "engine/cuda/kernels/norm_plan.h"
#include "engine/cuda/kernels/norm_walk.h"
#include "engine/cuda/kernels/types.h"
#include "engine/host_device.h"
#include "engine/running_statistics.h"

namespace tandem::cuda::kernels {

/// The sum of `value` over the block, for every thread: thread 0 stores it in *slot, then sync.
template <typename Block>
TANDEM_HD float share_sum(Block& block, float value, float* slot) {
  const float total = block.sum(value);
  if (block.thread() == 0) *slot = total;
  block.sync();
  return *slot;
}

/// Block (c, split) of the statistics kernel over x: (N, C, HW) in packs of V values →
/// partials[c * splits + split] = {the chunk's sum, its sum of squared deviations from its own
/// mean}; partials: (C, splits, 2). `slot`: one float of shared memory.
template <int V, typename Block, typename T>
TANDEM_HD void batch_norm_statistics_block(Block& block, float* slot, int64_t c, int64_t split,
                                           const NormPlan& plan, const T* x, const NormShape& s,
                                           float* partials) {
  const int64_t begin = split * plan.chunk;
  const int64_t end = min_of(begin + plan.chunk, plan.packs);
  const int64_t first = begin + block.thread();
  const ChannelWalk start(s, V, c, first, kNormBlock);
  float sum = 0.0f;
  ChannelWalk walk = start;
  for (int64_t j = first; j < end; j += kNormBlock, walk.advance()) {
    const Pack<T, V> p = load_pack<V>(x + walk.offset);
    for (int k = 0; k < V; ++k) sum += widen(p.v[k]);
  }
  const float block_sum = share_sum(block, sum, slot);
  const float mean = block_sum / static_cast<float>((end - begin) * V);
  float squares = 0.0f;
  walk = start;
  for (int64_t j = first; j < end; j += kNormBlock, walk.advance()) {
    const Pack<T, V> p = load_pack<V>(x + walk.offset);
    for (int k = 0; k < V; ++k) {
      const float d = widen(p.v[k]) - mean;
      squares += d * d;
    }
  }
  const float block_squares = block.sum(squares);
  if (block.thread() == 0) {
    float* out = partials + (c * plan.splits + split) * 2;
    out[0] = block_sum;
    out[1] = block_squares;
  }
}

/// One thread per channel c < n = C: the partials of batch_norm_statistics_block → save_mean,
/// save_inv_std: (C) = the batch mean and 1 / sqrt(biased var + eps); running.mean and
/// running.var: (C), when not null, move towards the mean and the unbiased variance.
struct BatchNormFinalizeBody {
  const float* partials;  // (C, splits, 2)
  NormPlan plan;
  float eps;
  float* save_mean;
  float* save_inv_std;
  RunningStatisticsPointers running;
  int64_t n;
  TANDEM_HD void operator()(int64_t c) const {
    const float* own = partials + c * plan.splits * 2;
    const int64_t count = plan.packs * plan.pack;
    double total = 0.0;
    for (int64_t k = 0; k < plan.splits; ++k) total += own[k * 2];
    const double mean = total / static_cast<double>(count);
    double m2 = 0.0;
    for (int64_t k = 0; k < plan.splits; ++k) {
      const auto values = static_cast<double>(split_values(plan, k));
      const double d = own[k * 2] / values - mean;
      m2 += own[k * 2 + 1] + values * d * d;
    }
    const auto batch_mean = static_cast<float>(mean);
    const auto var = static_cast<float>(m2 / static_cast<double>(count));
    save_mean[c] = batch_mean;
    save_inv_std[c] = 1.0f / sqrtf(var + eps);
    if (running.mean != nullptr) {
      running.mean[c] = running_average(running.mean[c], batch_mean, running.momentum);
      running.var[c] =
          running_average(running.var[c], unbiased_variance(var, count), running.momentum);
    }
  }
};

/// Thread `thread` of the `threads` of a full grid: y = (x - mean) * (gamma * inv_std) + beta per
/// channel, plus residual when given, then max(y, 0) when `relu`, over packs thread, thread +
/// threads, ... of x, residual (or null; only with relu: a residual block's end), y: (N, C, HW);
/// mean, inv_std, gamma, beta: (C). The sum is float32, rounded once to T.
template <int V, typename T>
TANDEM_HD void batch_norm_normalize_packs(int64_t thread, int64_t threads, const T* x,
                                          const NormShape& s, const float* mean,
                                          const float* inv_std, const float* gamma,
                                          const float* beta, const T* residual, bool relu, T* y) {
  const int64_t packs = s.n * s.c * s.hw / V;
  TensorWalk walk(s, V, thread, threads);
  for (int64_t i = thread; i < packs; i += threads, walk.advance()) {
    const int64_t c = walk.channel;
    const float scale = gamma[c] * inv_std[c];
    const float m = mean[c], shift = beta[c];
    const Pack<T, V> in = load_pack<V>(x + i * V);
    const Pack<T, V> add = residual != nullptr ? load_pack<V>(residual + i * V) : in;
    Pack<T, V> out;
    for (int k = 0; k < V; ++k) {
      float v = (widen(in.v[k]) - m) * scale + shift;
      if (residual != nullptr) v += widen(add.v[k]);
      out.v[k] = narrow<T>(relu && v < 0.0f ? 0.0f : v);  // NaN goes through (not fmaxf)
    }
    store_pack<V>(y + i * V, out);
  }
}

/// inv_std: (n) = 1 / sqrt(var + eps), from var: (n): inference's per-channel factor, computed
/// once per channel rather than per value.
struct BatchNormInvStdBody {
  const float* var;
  float eps;
  float* inv_std;
  int64_t n;
  TANDEM_HD void operator()(int64_t c) const { inv_std[c] = 1.0f / sqrtf(var[c] + eps); }
};

}  // namespace tandem::cuda::kernels
