#pragma once
/// How the training batch-norm kernels (batch_norm.cu) split an (N, C, HW) tensor over the GPU, as
/// a pure function of the shape, the element size, the pointers' alignment and the
/// multiprocessor count, so that host code and the unit tests can check it. No CUDA include.
/// Note [Batch-norm kernels] in batch_norm.h says how the kernels use it.

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "engine/cuda/kernels/sum_plan.h"
#include "engine/cuda/kernels/types.h"

namespace tandem::cuda::kernels {

constexpr int kNormBlock = 256;
/// Bytes of the widest load: 8 bfloat16 or 4 float32 values.
constexpr int kPackBytes = 16;
/// A statistics block gets at least one pack per thread.
constexpr int64_t kMinPacksPerNormBlock = kNormBlock;

struct NormPlan {
  int pack = 1;        ///< elements per load and store, 1 or kPackBytes / sizeof(element)
  int64_t packs = 0;   ///< packs per channel: N * HW / pack
  int64_t splits = 1;  ///< blocks per channel in the statistics kernels
  int64_t chunk = 0;   ///< packs per split (the last split may have fewer, never none)
};

/// The widest pack for `s` and `element_size`-byte elements: kPackBytes wide when it divides
/// every row of HW values and every pointer is aligned to it, else one element.
inline int norm_pack(const NormShape& s, int element_size,
                     std::initializer_list<const void*> pointers) {
  const int wide = kPackBytes / element_size;
  if (s.hw % wide != 0) return 1;
  for (const void* p : pointers) {
    if (p != nullptr && reinterpret_cast<uintptr_t>(p) % kPackBytes != 0) return 1;
  }
  return wide;
}

/// The plan for `s` with packs of `pack` elements on `sm_count` multiprocessors: channels split
/// into enough blocks for four per multiprocessor (split_reduction in sum_plan.h). An empty
/// tensor gets an empty plan (no packs), which the launchers skip.
inline NormPlan plan_norm(const NormShape& s, int pack, int sm_count) {
  NormPlan plan;
  plan.pack = pack;
  plan.packs = s.n * s.hw / pack;
  if (s.c == 0 || plan.packs == 0) return plan;
  const SumPlan split = split_reduction(s.c, plan.packs, sm_count, kMinPacksPerNormBlock);
  plan.splits = split.splits;
  plan.chunk = split.chunk;
  return plan;
}

/// The values of channel c's split `split` under `plan`.
TANDEM_HD inline int64_t split_values(const NormPlan& plan, int64_t split) {
  const int64_t begin = split * plan.chunk;
  const int64_t end = begin + plan.chunk < plan.packs ? begin + plan.chunk : plan.packs;
  return (end - begin) * plan.pack;
}

/// Floats of device scratch that the training kernels need for `channels` channels under
/// `plan`: two partial sums per (channel, split), then two per channel (backward's
/// coefficients of grad_x).
inline size_t norm_workspace_floats(const NormPlan& plan, int64_t channels) {
  return static_cast<size_t>(channels * plan.splits * 2 + channels * 2);
}

}  // namespace tandem::cuda::kernels
