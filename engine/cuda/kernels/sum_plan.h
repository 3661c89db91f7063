#pragma once
/// How sum() (reduce.cu) splits a reduction over the GPU, as a pure function of the layout and
/// the multiprocessor count, so host code and the unit tests can check it. No CUDA include.
///
/// A sum has `outputs` results of `reduce_count` terms each. Few long sums (a full sum,
/// batch-norm style {0, 2, 3}) get one block per output, split further along the reduced range
/// when there are too few outputs to fill the GPU; the split partials go to a double workspace
/// that a second kernel adds up in a fixed order. Many short sums (a broadcast gradient summed
/// back over a small dim) get one thread per output.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "engine/cuda/kernels/grid.h"
#include "engine/cuda/kernels/types.h"

namespace tandem::cuda::kernels {

constexpr int kSumBlock = 256;
constexpr int64_t kMinTermsPerBlock = 2048;
constexpr int64_t kMaxSplits = 1024;

struct SumPlan {
  bool per_thread = false;  ///< one thread per output; else blocks of kSumBlock threads
  int64_t splits = 1;       ///< blocks per output; > 1 sums partials in a second kernel
  int64_t chunk = 0;        ///< terms per split (the last split may have fewer, never none)
};

/// Blocks per output for `outputs` reductions of `terms` terms each (> 0): enough blocks for four
/// per multiprocessor, but none with fewer than `min_terms` terms (nor more than kMaxSplits per
/// output). Batch norm's statistics split the same way (norm_plan.h).
inline SumPlan split_reduction(int64_t outputs, int64_t terms, int sm_count, int64_t min_terms) {
  SumPlan plan;
  const int64_t target_blocks = 4LL * std::max(sm_count, 1);
  const int64_t wanted = (target_blocks + outputs - 1) / outputs;
  const int64_t affordable = (terms + min_terms - 1) / min_terms;
  const int64_t splits = std::clamp<int64_t>(std::min(wanted, affordable), 1, kMaxSplits);
  plan.chunk = (terms + splits - 1) / splits;
  plan.splits = (terms + plan.chunk - 1) / plan.chunk;
  return plan;
}

inline SumPlan plan_sum(const ReduceLayout& layout, int sm_count) {
  SumPlan plan;
  const int64_t threads_to_fill = 4LL * sm_count * kThreads;
  if (layout.reduce_count <= 32 ||
      (layout.outputs >= threads_to_fill && layout.reduce_count <= 1024)) {
    plan.per_thread = true;
    return plan;
  }
  return split_reduction(layout.outputs, layout.reduce_count, sm_count, kMinTermsPerBlock);
}

/// Bytes of device scratch that sum() needs for `layout` on a device with `sm_count`
/// multiprocessors (0 when it needs none): the split partials, (outputs, splits) doubles.
inline size_t sum_workspace_bytes(const ReduceLayout& layout, int sm_count) {
  if (layout.outputs == 0) return 0;
  const SumPlan plan = plan_sum(layout, sm_count);
  return plan.splits > 1 ? static_cast<size_t>(layout.outputs * plan.splits) * sizeof(double) : 0;
}

}  // namespace tandem::cuda::kernels
