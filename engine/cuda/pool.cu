// Pooling launches; the bodies (max pooling with argmax, adaptive average pooling, both
// backwards as per-input-element gathers) are in kernels/pool.h.

#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/pool.h"
#include "engine/cuda/launch.cuh"

namespace tandem::cuda::kernels {

void max_pool2d_forward(const float* x, const PoolShape& shape, float* y, int32_t* argmax,
                        cudaStream_t stream) {
  const int64_t total = shape.n * shape.c * shape.p * shape.q;
  if (total == 0) return;
  TANDEM_CHECK(shape.h * shape.w <= INT32_MAX, "[max_pool2d] planes of ", shape.h, "x", shape.w,
               " are too large for int32 indices");
  launch_grid_stride(MaxPool2dForwardBody{x, shape, y, argmax, total}, stream);
  CUDA_CHECK_LAUNCH();
}

void max_pool2d_backward(const float* grad_y, const int32_t* argmax, const PoolShape& shape,
                         float* grad_x, cudaStream_t stream) {
  const int64_t total = shape.n * shape.c * shape.h * shape.w;
  if (total == 0) return;
  launch_grid_stride(MaxPool2dBackwardBody{grad_y, argmax, shape, grad_x, total}, stream);
  CUDA_CHECK_LAUNCH();
}

void adaptive_avg_pool2d_forward(const float* x, const PoolShape& shape, float* y,
                                 cudaStream_t stream) {
  const int64_t total = shape.n * shape.c * shape.p * shape.q;
  if (total == 0) return;
  launch_grid_stride(AdaptiveAvgPool2dForwardBody{x, shape, y, total}, stream);
  CUDA_CHECK_LAUNCH();
}

void adaptive_avg_pool2d_backward(const float* grad_y, const PoolShape& shape, float* grad_x,
                                  cudaStream_t stream) {
  const int64_t total = shape.n * shape.c * shape.h * shape.w;
  if (total == 0) return;
  launch_grid_stride(AdaptiveAvgPool2dBackwardBody{grad_y, shape, grad_x, total}, stream);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda::kernels
