#pragma once
/// Bodies of the reduction kernels (reduce.cu): sums of one output per thread, sums of one
/// output per block (or per split of it), the fixed-order sum of split partials (Note [Kernel
/// bodies] in grid.h), and the row argmax of one warp per row (Note [Block policy] in block.h).
/// The plan that picks between the sums is sum_plan.h.

#include <cmath>
#include <cstdint>

#include "engine/cuda/kernels/block.h"
#include "engine/cuda/kernels/grid.h"
#include "engine/cuda/kernels/sum_plan.h"
#include "engine/cuda/kernels/types.h"
#include "engine/host_device.h"

namespace tandem::cuda::kernels {

// Note [Element types] in types.h: sums take In (float or bfloat16) and write Out (the same, or
// float32 for a bfloat16 input, as conv2d's bias gradient). They add doubles, and a result is
// rounded to float32 first and then, for a bfloat16 Out, once more from that float32.

/// in: contiguous → out: (n) with n = layout.outputs, one output per element
template <typename In = float, typename Out = float>
struct SumPerThreadBody {
  const In* in;
  ReduceLayout layout;
  Out* out;
  int64_t n;
  TANDEM_HD void operator()(int64_t o) const {
    const In* base = in + offset_of(o, layout.kept);
    double total = 0.0;
    for (int64_t r = 0; r < layout.reduce_count; ++r) {
      total += widen(base[offset_of(r, layout.reduced)]);
    }
    out[o] = narrow<Out>(static_cast<float>(total));
  }
};

/// partials: (n, splits) → out: (n), each row added in order
template <typename Out = float>
struct SumPartialsBody {
  const double* partials;
  int64_t splits;
  Out* out;
  int64_t n;
  TANDEM_HD void operator()(int64_t o) const {
    double total = 0.0;
    for (int64_t s = 0; s < splits; ++s) total += partials[o * splits + s];
    out[o] = narrow<Out>(static_cast<float>(total));
  }
};

/// One thread of block (o, split) of a grid (outputs, splits) of kSumBlock threads: the block
/// sums terms [split * chunk, (split + 1) * chunk) of output o of in (contiguous) into out: (o)
/// when splits == 1, else into partials: (outputs, splits). Block reductions add doubles.
template <typename Block, typename In, typename Out>
TANDEM_HD void sum_per_block(Block& block, int64_t o, int64_t split, int64_t splits, const In* in,
                             const ReduceLayout& layout, int64_t chunk, double* partials,
                             Out* out) {
  const In* base = in + offset_of(o, layout.kept);
  const int64_t begin = split * chunk;
  const int64_t end = min_of(begin + chunk, layout.reduce_count);
  double total = 0.0;
  for (int64_t r = begin + block.thread(); r < end; r += kSumBlock) {
    total += widen(base[offset_of(r, layout.reduced)]);
  }
  const double block_total = block.sum(total);
  if (block.thread() == 0) {
    if (splits == 1) {
      out[o] = narrow<Out>(static_cast<float>(block_total));
    } else {
      partials[o * splits + split] = block_total;
    }
  }
}

/// in: (rows, cols) → out: (rows), the index of each row's first maximum; one warp per row, so
/// block `block_index` of `blocks` (of `threads` threads) takes rows warp + k * (grid's warps).
template <typename Warp>
TANDEM_HD void argmax_rows_warps(Warp& warp, int64_t block_index, int64_t blocks, int64_t threads,
                                 const float* in, int64_t rows, int64_t cols, int64_t* out) {
  constexpr int64_t kNone = INT64_MAX;
  const int lane = warp.thread() % 32;
  const int64_t warps_per_block = threads / 32;
  for (int64_t row = block_index * warps_per_block + warp.thread() / 32; row < rows;
       row += blocks * warps_per_block) {
    const float* values = in + row * cols;
    float best = -INFINITY;
    int64_t best_index = kNone;
    if (lane < cols) {
      best = values[lane];
      best_index = lane;
    }
    for (int64_t c = lane + 32; c < cols; c += 32) {
      if (values[c] > best) {  // strict: the first maximum of this lane's columns stays
        best = values[c];
        best_index = c;
      }
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = warp.shfl_down(best, offset);
      const int64_t other_index = warp.shfl_down(best_index, offset);
      if (other > best || (other == best && other_index < best_index)) {
        best = other;
        best_index = other_index;
      }
    }
    if (lane == 0) out[row] = best_index;
  }
}

}  // namespace tandem::cuda::kernels
