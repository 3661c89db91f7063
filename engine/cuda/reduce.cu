// Reductions: sums over any set of dims (double accumulation, deterministic: no atomics) and the
// row argmax. kernels/sum_plan.h says how a sum is split; kernels/reduce.h has the per-thread
// bodies.

#include <cub/block/block_reduce.cuh>

#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/reduce.h"
#include "engine/cuda/kernels/sum_plan.h"
#include "engine/cuda/launch.cuh"

namespace tandem::cuda::kernels {
namespace {

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

}  // namespace

void sum(const float* in, const ReduceLayout& layout, int sm_count, void* workspace, float* out,
         cudaStream_t stream) {
  if (layout.outputs == 0) return;
  TANDEM_CHECK(layout.reduce_count > 0, "[sum] empty reductions are the caller's (fill with 0)");
  const SumPlan plan = plan_sum(layout, sm_count);
  if (plan.per_thread) {
    launch_grid_stride(SumPerThreadBody{in, layout, out, layout.outputs}, stream);
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
    launch_grid_stride(SumPartialsBody{partials, plan.splits, out, layout.outputs}, stream);
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
