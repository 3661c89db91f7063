// Reductions: sums over any set of dims (double accumulation, deterministic: no atomics) and the
// row argmax.
//
// A sum has `outputs` results of `reduce_count` terms each. Few long sums (a
// full sum, batch-norm style {0, 2, 3}) get one block per output, split further along the
// reduced range when there are too few outputs to fill the GPU; the split partials go to a
// double workspace that a second kernel adds up in a fixed order. Many short sums (a broadcast
// gradient summed back over a small dim) get one thread per output.

#include <cub/block/block_reduce.cuh>

#include "engine/cuda/kernels.h"
#include "engine/cuda/launch.cuh"

namespace tandem::cuda::kernels {
namespace {

constexpr int kSumBlock = 256;
constexpr int64_t kMinTermsPerBlock = 2048;
constexpr int64_t kMaxSplits = 1024;

__device__ __forceinline__ int64_t offset_of(int64_t index, const StridedLayout& layout) {
  int64_t offset = 0;
  for (int d = layout.rank - 1; d >= 0; --d) {
    offset += (index % layout.size[d]) * layout.stride[d];
    index /= layout.size[d];
  }
  return offset;
}

// in: contiguous → out: (outputs), one thread per output
__global__ void sum_per_thread_kernel(const float* in, ReduceLayout layout, float* out) {
  TANDEM_GRID_STRIDE_LOOP(o, layout.outputs) {
    const float* base = in + offset_of(o, layout.kept);
    double total = 0.0;
    for (int64_t r = 0; r < layout.reduce_count; ++r) total += base[offset_of(r, layout.reduced)];
    out[o] = static_cast<float>(total);
  }
}

// in: contiguous → out: (outputs) when gridDim.y == 1, else partials: (outputs, gridDim.y).
// grid: (outputs, splits); each block sums terms [split * chunk, (split + 1) * chunk).
__global__ void sum_per_block_kernel(const float* in, ReduceLayout layout, int64_t chunk,
                                     double* partials, float* out) {
  const int64_t o = blockIdx.x;
  const int64_t split = blockIdx.y;
  const float* base = in + offset_of(o, layout.kept);
  const int64_t begin = split * chunk;
  const int64_t end = min_of(begin + chunk, layout.reduce_count);
  double total = 0.0;
  for (int64_t r = begin + threadIdx.x; r < end; r += kSumBlock) {
    total += base[offset_of(r, layout.reduced)];
  }
  using BlockReduce = cub::BlockReduce<double, kSumBlock>;
  __shared__ typename BlockReduce::TempStorage storage;
  const double block_total = BlockReduce(storage).Sum(total);
  if (threadIdx.x == 0) {
    if (gridDim.y == 1) {
      out[o] = static_cast<float>(block_total);
    } else {
      partials[o * gridDim.y + split] = block_total;
    }
  }
}

// partials: (outputs, splits) → out: (outputs)
__global__ void sum_partials_kernel(const double* partials, int64_t splits, int64_t outputs,
                                    float* out) {
  TANDEM_GRID_STRIDE_LOOP(o, outputs) {
    double total = 0.0;
    for (int64_t s = 0; s < splits; ++s) total += partials[o * splits + s];
    out[o] = static_cast<float>(total);
  }
}

// in: (rows, cols) → out: (rows); one warp per row.
__global__ void argmax_rows_kernel(const float* in, int64_t rows, int64_t cols, int64_t* out) {
  constexpr int64_t kNone = INT64_MAX;
  const int lane = threadIdx.x % 32;
  const int64_t warps_per_block = blockDim.x / 32;
  for (int64_t row = blockIdx.x * warps_per_block + threadIdx.x / 32; row < rows;
       row += static_cast<int64_t>(gridDim.x) * warps_per_block) {
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
      const float other = __shfl_down_sync(0xffffffffu, best, offset);
      const int64_t other_index = __shfl_down_sync(0xffffffffu, best_index, offset);
      if (other > best || (other == best && other_index < best_index)) {
        best = other;
        best_index = other_index;
      }
    }
    if (lane == 0) out[row] = best_index;
  }
}

struct SumPlan {
  bool per_thread = false;
  int64_t splits = 1;
  int64_t chunk = 0;
};

SumPlan plan_sum(const ReduceLayout& layout, int sm_count) {
  SumPlan plan;
  const int64_t threads_to_fill = 4LL * sm_count * kThreads;
  if (layout.reduce_count <= 32 ||
      (layout.outputs >= threads_to_fill && layout.reduce_count <= 1024)) {
    plan.per_thread = true;
    return plan;
  }
  const int64_t target_blocks = 4LL * sm_count;
  const int64_t wanted = (target_blocks + layout.outputs - 1) / layout.outputs;
  const int64_t affordable = (layout.reduce_count + kMinTermsPerBlock - 1) / kMinTermsPerBlock;
  const int64_t splits = std::clamp<int64_t>(std::min(wanted, affordable), 1, kMaxSplits);
  plan.chunk = (layout.reduce_count + splits - 1) / splits;
  plan.splits = (layout.reduce_count + plan.chunk - 1) / plan.chunk;
  return plan;
}

}  // namespace

size_t sum_workspace_bytes(const ReduceLayout& layout, int sm_count) {
  if (layout.outputs == 0) return 0;
  const SumPlan plan = plan_sum(layout, sm_count);
  return plan.splits > 1 ? static_cast<size_t>(layout.outputs * plan.splits) * sizeof(double) : 0;
}

void sum(const float* in, const ReduceLayout& layout, int sm_count, void* workspace, float* out,
         cudaStream_t stream) {
  if (layout.outputs == 0) return;
  TANDEM_CHECK(layout.reduce_count > 0, "[sum] empty reductions are the caller's (fill with 0)");
  const SumPlan plan = plan_sum(layout, sm_count);
  if (plan.per_thread) {
    sum_per_thread_kernel<<<blocks_for(layout.outputs), kThreads, 0, stream>>>(in, layout, out);
    CUDA_CHECK_LAUNCH();
    return;
  }
  TANDEM_CHECK(layout.outputs <= INT32_MAX, "[sum] ", layout.outputs, " outputs is too many");
  auto* partials = static_cast<double*>(workspace);
  TANDEM_CHECK(plan.splits == 1 || partials != nullptr, "[sum] missing workspace");
  const dim3 grid(static_cast<unsigned>(layout.outputs), static_cast<unsigned>(plan.splits));
  sum_per_block_kernel<<<grid, kSumBlock, 0, stream>>>(in, layout, plan.chunk, partials, out);
  CUDA_CHECK_LAUNCH();
  if (plan.splits > 1) {
    sum_partials_kernel<<<blocks_for(layout.outputs), kThreads, 0, stream>>>(partials, plan.splits,
                                                                             layout.outputs, out);
    CUDA_CHECK_LAUNCH();
  }
}

void argmax_rows(const float* in, int64_t rows, int64_t cols, int64_t* out, cudaStream_t stream) {
  if (rows == 0) return;
  constexpr int kWarpsPerBlock = kThreads / 32;
  const auto blocks = static_cast<unsigned>(
      std::min<int64_t>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, 1 << 20));
  argmax_rows_kernel<<<blocks, kThreads, 0, stream>>>(in, rows, cols, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda::kernels
