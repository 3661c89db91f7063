// Reductions: sums over any set of dims (double accumulation, deterministic: no atomics) and the
// row argmax. kernels/sum_plan.h says how a sum is split; kernels/reduce.h has the bodies.

#include "engine/cuda/kernels/block.cuh"
#include "engine/cuda/kernels/launch.cuh"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/kernels/reduce.h"
#include "engine/cuda/kernels/sum_plan.h"

namespace tandem::cuda::kernels {
namespace {

// grid: (outputs, splits) of kSumBlock threads (sum_per_block in kernels/reduce.h).
template <typename In, typename Out>
__global__ void sum_per_block_kernel(const In* in, ReduceLayout layout, int64_t chunk,
                                     double* partials, Out* out) {
  using Block = CudaBlock<double, kSumBlock>;
  __shared__ Block::Storage storage;
  Block block(storage);
  sum_per_block(block, blockIdx.x, blockIdx.y, gridDim.y, in, layout, chunk, partials, out);
}

// One warp per row (argmax_rows_warps in kernels/reduce.h).
__global__ void argmax_rows_kernel(const float* in, int64_t rows, int64_t cols, int64_t* out) {
  CudaWarp warp;
  argmax_rows_warps(warp, blockIdx.x, gridDim.x, blockDim.x, in, rows, cols, out);
}

template <typename In, typename Out>
void sum_as(const In* in, const ReduceLayout& layout, int sm_count, void* workspace, Out* out,
            cudaStream_t stream) {
  const SumPlan plan = plan_sum(layout, sm_count);
  if (plan.per_thread) {
    launch_grid_stride(SumPerThreadBody<In, Out>{in, layout, out, layout.outputs}, stream);
    CUDA_CHECK_LAUNCH();
    return;
  }
  TANDEM_CHECK(layout.outputs <= INT32_MAX, "[sum] ", layout.outputs, " outputs is too many");
  auto* partials = static_cast<double*>(workspace);
  TANDEM_CHECK(plan.splits == 1 || partials != nullptr, "[sum] missing workspace");
  const dim3 grid(static_cast<unsigned>(layout.outputs), static_cast<unsigned>(plan.splits));
  sum_per_block_kernel<In, Out>
      <<<grid, kSumBlock, 0, stream>>>(in, layout, plan.chunk, partials, out);
  CUDA_CHECK_LAUNCH();
  if (plan.splits > 1) {
    launch_grid_stride(SumPartialsBody<Out>{partials, plan.splits, out, layout.outputs}, stream);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

void sum(const void* in, DType in_type, const ReduceLayout& layout, int sm_count, void* workspace,
         void* out, DType out_type, cudaStream_t stream) {
  if (layout.outputs == 0) return;
  TANDEM_CHECK(layout.reduce_count > 0, "[sum] empty reductions are the caller's (fill with 0)");
  using F = DType;
  if (in_type == F::Float32 && out_type == F::Float32) {
    sum_as(static_cast<const float*>(in), layout, sm_count, workspace, static_cast<float*>(out),
           stream);
  } else if (in_type == F::BFloat16 && out_type == F::BFloat16) {
    sum_as(static_cast<const BFloat16*>(in), layout, sm_count, workspace,
           static_cast<BFloat16*>(out), stream);
  } else if (in_type == F::BFloat16 && out_type == F::Float32) {
    sum_as(static_cast<const BFloat16*>(in), layout, sm_count, workspace, static_cast<float*>(out),
           stream);
  } else {
    TANDEM_FAIL("[sum] takes float32 → float32, bfloat16 → bfloat16 or bfloat16 → float32");
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
