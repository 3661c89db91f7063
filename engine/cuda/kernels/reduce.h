#pragma once
/// Bodies of the per-thread reduction kernels (reduce.cu): sums of one output per thread and
/// the fixed-order sum of split partials. Note [Kernel bodies] in grid.h; the plan that picks
/// between them is sum_plan.h.

#include <cstdint>

#include "engine/cuda/kernels/types.h"
#include "engine/host_device.h"

namespace tandem::cuda::kernels {

/// in: contiguous → out: (n) with n = layout.outputs, one output per element
struct SumPerThreadBody {
  const float* in;
  ReduceLayout layout;
  float* out;
  int64_t n;
  TANDEM_HD void operator()(int64_t o) const {
    const float* base = in + offset_of(o, layout.kept);
    double total = 0.0;
    for (int64_t r = 0; r < layout.reduce_count; ++r) total += base[offset_of(r, layout.reduced)];
    out[o] = static_cast<float>(total);
  }
};

/// partials: (n, splits) → out: (n), each row added in order
struct SumPartialsBody {
  const double* partials;
  int64_t splits;
  float* out;
  int64_t n;
  TANDEM_HD void operator()(int64_t o) const {
    double total = 0.0;
    for (int64_t s = 0; s < splits; ++s) total += partials[o * splits + s];
    out[o] = static_cast<float>(total);
  }
};

}  // namespace tandem::cuda::kernels
