// Pooling launches; the bodies (max pooling with argmax, adaptive average pooling, both
// backwards as per-input-element gathers) are in kernels/pool.h, on float32 or bfloat16.

#include "engine/cuda/kernels/launch.cuh"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/kernels/pool.h"

namespace tandem::cuda::kernels {

void max_pool2d_forward(DType type, const void* x, const PoolShape& shape, void* y, int32_t* argmax,
                        cudaStream_t stream) {
  const int64_t total = shape.n * shape.c * shape.p * shape.q;
  if (total == 0) return;
  TANDEM_CHECK(shape.h * shape.w <= INT32_MAX, "[max_pool2d] planes of ", shape.h, "x", shape.w,
               " are too large for int32 indices");
  with_activation_type(type, "max_pool2d", [&](auto t) {
    using T = decltype(t);
    launch_grid_stride(
        MaxPool2dForwardBody<T>{static_cast<const T*>(x), shape, static_cast<T*>(y), argmax, total},
        stream);
  });
}

void max_pool2d_backward(DType type, const void* grad_y, const int32_t* argmax,
                         const PoolShape& shape, void* grad_x, cudaStream_t stream) {
  const int64_t total = shape.n * shape.c * shape.h * shape.w;
  if (total == 0) return;
  with_activation_type(type, "max_pool2d_backward", [&](auto t) {
    using T = decltype(t);
    launch_grid_stride(MaxPool2dBackwardBody<T>{static_cast<const T*>(grad_y), argmax, shape,
                                                static_cast<T*>(grad_x), total},
                       stream);
  });
}

void adaptive_avg_pool2d_forward(DType type, const void* x, const PoolShape& shape, void* y,
                                 cudaStream_t stream) {
  const int64_t total = shape.n * shape.c * shape.p * shape.q;
  if (total == 0) return;
  with_activation_type(type, "adaptive_avg_pool2d", [&](auto t) {
    using T = decltype(t);
    launch_grid_stride(
        AdaptiveAvgPool2dForwardBody<T>{static_cast<const T*>(x), shape, static_cast<T*>(y), total},
        stream);
  });
}

void adaptive_avg_pool2d_backward(DType type, const void* grad_y, const PoolShape& shape,
                                  void* grad_x, cudaStream_t stream) {
  const int64_t total = shape.n * shape.c * shape.h * shape.w;
  if (total == 0) return;
  with_activation_type(type, "adaptive_avg_pool2d_backward", [&](auto t) {
    using T = decltype(t);
    launch_grid_stride(AdaptiveAvgPool2dBackwardBody<T>{static_cast<const T*>(grad_y), shape,
                                                        static_cast<T*>(grad_x), total},
                       stream);
  });
}

}  // namespace tandem::cuda::kernels
