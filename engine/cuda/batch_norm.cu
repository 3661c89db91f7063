// Tandem's own batch-norm kernels (Note [Own batch-norm kernels] in batch_norm.cpp); the bodies
// are in kernels/batch_norm.h.

#include <algorithm>

#include "engine/cuda/block.cuh"
#include "engine/cuda/kernels/batch_norm.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/launch.cuh"

namespace tandem::cuda::kernels {
namespace {

using NormBlock = CudaBlock<float, kNormBlock>;

// Grid: blocks_per_channels(C) blocks of kNormBlock threads, block-stride over channels.
template <typename T>
__global__ void batch_norm_forward_kernel(const T* x, NormShape s, const float* gamma,
                                          const float* beta, float eps, bool relu, T* y,
                                          float* save_mean, float* save_var) {
  __shared__ NormBlock::Storage storage;
  __shared__ float broadcast[2];
  NormBlock block(storage);
  batch_norm_forward_channels(block, broadcast, blockIdx.x, gridDim.x, x, s, gamma, beta, eps, relu,
                              y, save_mean, save_var);
}

template <typename T>
__global__ void batch_norm_backward_kernel(const T* grad_y, const T* y, const T* x, NormShape s,
                                           const float* gamma, const float* save_mean,
                                           const float* save_var, float eps, T* grad_x,
                                           float* grad_gamma, float* grad_beta) {
  __shared__ NormBlock::Storage storage;
  __shared__ float broadcast[2];
  NormBlock block(storage);
  batch_norm_backward_channels(block, broadcast, blockIdx.x, gridDim.x, grad_y, y, x, s, gamma,
                               save_mean, save_var, eps, grad_x, grad_gamma, grad_beta);
}

unsigned blocks_per_channels(int64_t channels) {
  return static_cast<unsigned>(std::clamp<int64_t>(channels, 1, 1 << 16));
}

void check_shape(const NormShape& s, const char* op) {
  TANDEM_CHECK(s.n * s.hw > 0, "[", op, "] needs at least one value per channel, got N = ", s.n,
               " and H * W = ", s.hw);
}

}  // namespace

void batch_norm_forward_training(ElementType type, const void* x, const NormShape& s,
                                 const float* gamma, const float* beta, float eps, bool relu,
                                 void* y, float* save_mean, float* save_var, cudaStream_t stream) {
  if (s.c == 0) return;
  check_shape(s, "batch_norm2d");
  with_activation_type(type, "batch_norm2d", [&](auto t) {
    using T = decltype(t);
    batch_norm_forward_kernel<T><<<blocks_per_channels(s.c), kNormBlock, 0, stream>>>(
        static_cast<const T*>(x), s, gamma, beta, eps, relu, static_cast<T*>(y), save_mean,
        save_var);
  });
}

void batch_norm_forward_inference(ElementType type, const void* x, const NormShape& s,
                                  const float* gamma, const float* beta, const float* running_mean,
                                  const float* running_var, float eps, void* y,
                                  cudaStream_t stream) {
  const int64_t total = s.n * s.c * s.hw;
  if (total == 0) return;
  with_activation_type(type, "batch_norm2d", [&](auto t) {
    using T = decltype(t);
    launch_grid_stride(
        BatchNormInferenceBody<T>{static_cast<const T*>(x), s, gamma, beta, running_mean,
                                  running_var, eps, static_cast<T*>(y), total},
        stream);
  });
}

void batch_norm_backward(ElementType type, const void* grad_y, const void* y, const void* x,
                         const NormShape& s, const float* gamma, const float* save_mean,
                         const float* save_var, float eps, void* grad_x, float* grad_gamma,
                         float* grad_beta, cudaStream_t stream) {
  if (s.c == 0) return;
  check_shape(s, "batch_norm2d_backward");
  with_activation_type(type, "batch_norm2d_backward", [&](auto t) {
    using T = decltype(t);
    batch_norm_backward_kernel<T><<<blocks_per_channels(s.c), kNormBlock, 0, stream>>>(
        static_cast<const T*>(grad_y), static_cast<const T*>(y), static_cast<const T*>(x), s, gamma,
        save_mean, save_var, eps, static_cast<T*>(grad_x), grad_gamma, grad_beta);
  });
}

}  // namespace tandem::cuda::kernels
