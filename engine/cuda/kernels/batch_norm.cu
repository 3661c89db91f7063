// Tandem's own batch-norm kernels (Note [Own batch-norm kernels] in batch_norm.cpp), three per
// training pass (Note [Batch-norm kernels] in kernels/batch_norm.h, where the bodies are).

#include <type_traits>

#include "engine/cuda/kernels/batch_norm.h"
#include "engine/cuda/kernels/batch_norm_backward.h"
#include "engine/cuda/kernels/block.cuh"
#include "engine/cuda/kernels/launch.cuh"
#include "engine/cuda/kernels/launch.h"

namespace tandem::cuda::kernels {
namespace {

using NormBlock = CudaBlock<float, kNormBlock>;

// grid: (C, plan.splits) of kNormBlock threads
template <int V, typename T>
__global__ void __launch_bounds__(kNormBlock)
    statistics_kernel(const T* x, NormShape s, NormPlan plan, float* partials) {
  __shared__ NormBlock::Storage storage;
  __shared__ float slot;
  NormBlock block(storage);
  batch_norm_statistics_block<V>(block, &slot, blockIdx.x, blockIdx.y, plan, x, s, partials);
}

// grid: (C, plan.splits) of kNormBlock threads
template <int V, typename T>
__global__ void __launch_bounds__(kNormBlock)
    backward_statistics_kernel(const T* grad_y, const T* y, const T* x, NormShape s, NormPlan plan,
                               const float* save_mean, float* partials) {
  __shared__ NormBlock::Storage storage;
  NormBlock block(storage);
  batch_norm_backward_statistics_block<V>(block, blockIdx.x, blockIdx.y, plan, grad_y, y, x, s,
                                          save_mean, partials);
}

__device__ int64_t grid_thread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ int64_t grid_threads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// A full grid over the packs of x (full_grid below).
template <int V, typename T>
__global__ void normalize_kernel(const T* x, NormShape s, const float* mean, const float* inv_std,
                                 const float* gamma, const float* beta, const T* residual,
                                 bool relu, T* y) {
  batch_norm_normalize_packs<V>(grid_thread(), grid_threads(), x, s, mean, inv_std, gamma, beta,
                                residual, relu, y);
}

template <int V, typename T>
__global__ void grad_x_kernel(const T* grad_y, const T* y, const T* x, NormShape s,
                              const float* gamma, const float* save_mean, const float* save_inv_std,
                              const float* coefficients, T* grad_x, T* grad_residual) {
  batch_norm_grad_x_packs<V>(grid_thread(), grid_threads(), grad_y, y, x, s, gamma, save_mean,
                             save_inv_std, coefficients, grad_x, grad_residual);
}

dim3 statistics_grid(const NormShape& s, const NormPlan& plan) {
  TANDEM_CHECK(s.c <= INT32_MAX, "[batch_norm2d] ", s.c, " channels is too many");
  return {static_cast<unsigned>(s.c), static_cast<unsigned>(plan.splits)};
}

// Blocks of kNormBlock threads for one pack per thread, capped (the bodies loop over the rest).
unsigned full_grid(const NormShape& s, int pack) {
  return blocks_for(s.n * s.c * s.hw / pack, kNormBlock);
}

// Runs launch(std::integral_constant<int, V>{}) with V = `pack`: the wide pack of T or 1.
template <typename T, typename Launch>
void with_pack(int pack, const Launch& launch) {
  constexpr int kWide = kPackBytes / static_cast<int>(sizeof(T));
  if (pack == kWide) {
    launch(std::integral_constant<int, kWide>{});
  } else {
    TANDEM_CHECK(pack == 1, "[batch_norm2d] packs of ", pack, " values, expected ", kWide, " or 1");
    launch(std::integral_constant<int, 1>{});
  }
}

bool is_empty(const NormShape& s, const NormPlan& plan, const char* op) {
  if (s.c == 0) return true;
  TANDEM_CHECK(plan.packs > 0, "[", op, "] needs at least one value per channel, got N = ", s.n,
               " and H * W = ", s.hw);
  return false;
}

}  // namespace

void batch_norm_forward_training(DType type, const void* x, const NormShape& s,
                                 const NormPlan& plan, const float* gamma, const float* beta,
                                 float eps, bool relu, const void* residual,
                                 const RunningStatisticsPointers& running, void* y,
                                 float* save_mean, float* save_inv_std, float* workspace,
                                 cudaStream_t stream) {
  if (is_empty(s, plan, "batch_norm2d")) return;
  float* partials = workspace;
  with_activation_type(type, "batch_norm2d", [&](auto t) {
    using T = decltype(t);
    with_pack<T>(plan.pack, [&](auto v) {
      constexpr int V = decltype(v)::value;
      statistics_kernel<V, T><<<statistics_grid(s, plan), kNormBlock, 0, stream>>>(
          static_cast<const T*>(x), s, plan, partials);
      CUDA_CHECK_LAUNCH();
      launch_grid_stride(
          BatchNormFinalizeBody{partials, plan, eps, save_mean, save_inv_std, running, s.c},
          stream);
      CUDA_CHECK_LAUNCH();
      normalize_kernel<V, T><<<full_grid(s, V), kNormBlock, 0, stream>>>(
          static_cast<const T*>(x), s, save_mean, save_inv_std, gamma, beta,
          static_cast<const T*>(residual), relu, static_cast<T*>(y));
    });
  });
}

void batch_norm_forward_inference(DType type, const void* x, const NormShape& s, int pack,
                                  const float* gamma, const float* beta, const float* running_mean,
                                  const float* running_var, float eps, float* inv_std, void* y,
                                  cudaStream_t stream) {
  if (s.n * s.c * s.hw == 0) return;
  launch_grid_stride(BatchNormInvStdBody{running_var, eps, inv_std, s.c}, stream);
  CUDA_CHECK_LAUNCH();
  with_activation_type(type, "batch_norm2d", [&](auto t) {
    using T = decltype(t);
    with_pack<T>(pack, [&](auto v) {
      constexpr int V = decltype(v)::value;
      normalize_kernel<V, T><<<full_grid(s, V), kNormBlock, 0, stream>>>(
          static_cast<const T*>(x), s, running_mean, inv_std, gamma, beta, nullptr, false,
          static_cast<T*>(y));
    });
  });
}

void batch_norm_backward(DType type, const void* grad_y, const void* y, const void* x,
                         const NormShape& s, const NormPlan& plan, const float* gamma,
                         const float* save_mean, const float* save_inv_std, void* grad_x,
                         void* grad_residual, float* grad_gamma, float* grad_beta, float* workspace,
                         cudaStream_t stream) {
  if (is_empty(s, plan, "batch_norm2d_backward")) return;
  float* partials = workspace;
  float* coefficients = workspace + s.c * plan.splits * 2;
  with_activation_type(type, "batch_norm2d_backward", [&](auto t) {
    using T = decltype(t);
    const auto* typed_y = static_cast<const T*>(y);
    const auto* typed_x = static_cast<const T*>(x);
    const auto* typed_grad_y = static_cast<const T*>(grad_y);
    with_pack<T>(plan.pack, [&](auto v) {
      constexpr int V = decltype(v)::value;
      backward_statistics_kernel<V, T><<<statistics_grid(s, plan), kNormBlock, 0, stream>>>(
          typed_grad_y, typed_y, typed_x, s, plan, save_mean, partials);
      CUDA_CHECK_LAUNCH();
      launch_grid_stride(BatchNormBackwardFinalizeBody{partials, plan, save_inv_std, grad_gamma,
                                                       grad_beta, coefficients, s.c},
                         stream);
      CUDA_CHECK_LAUNCH();
      grad_x_kernel<V, T><<<full_grid(s, V), kNormBlock, 0, stream>>>(
          typed_grad_y, typed_y, typed_x, s, gamma, save_mean, save_inv_std, coefficients,
          static_cast<T*>(grad_x), static_cast<T*>(grad_residual));
    });
  });
}

}  // namespace tandem::cuda::kernels
