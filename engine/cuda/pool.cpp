// Pooling, float32 or bfloat16 (kernels in pool.cu). Max pooling's workspace holds each window's
// argmax as int32.

#include "engine/cuda/activation_type.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/on_device.h"
#include "engine/ops/factory.h"

namespace tandem::cuda {
namespace {

// x: (N, C, H, W), y: (N, C, P, Q)
kernels::PoolShape pool_shape(const Shape& x, const Shape& y, const Pool2dOptions& options) {
  return {x[0], x[1], x[2], x[3], y[2], y[3], options.kernel_size, options.stride, options.padding};
}

}  // namespace

void CudaBackend::max_pool2d_forward(const Tensor& x, const Pool2dOptions& options, Tensor& y,
                                     Tensor& workspace) {
  OnDevice on(y, "max_pool2d");
  workspace = empty({y.numel() * static_cast<int64_t>(sizeof(int32_t))},
                    {.dtype = DType::UInt8, .device = y.device()});
  kernels::max_pool2d_forward(activation_type("max_pool2d", {&x, &y}), x.data_ptr(),
                              pool_shape(x.shape(), y.shape(), options), y.data_ptr(),
                              static_cast<int32_t*>(workspace.data_ptr()), on.stream);
}

void CudaBackend::max_pool2d_backward(const Tensor& grad_y, const Tensor& x, const Tensor&,
                                      const Tensor& workspace, const Pool2dOptions& options,
                                      Tensor& grad_x) {
  OnDevice on(grad_x, "max_pool2d_backward");
  TANDEM_CHECK(workspace.defined() && workspace.device() == grad_x.device() &&
                   workspace.numel() == grad_y.numel() * static_cast<int64_t>(sizeof(int32_t)),
               "[max_pool2d_backward] the workspace does not come from this backend's forward");
  kernels::max_pool2d_backward(activation_type("max_pool2d_backward", {&grad_y, &grad_x}),
                               grad_y.data_ptr(), static_cast<const int32_t*>(workspace.data_ptr()),
                               pool_shape(x.shape(), grad_y.shape(), options), grad_x.data_ptr(),
                               on.stream);
}

void CudaBackend::adaptive_avg_pool2d_forward(const Tensor& x, Tensor& y) {
  OnDevice on(y, "adaptive_avg_pool2d");
  kernels::adaptive_avg_pool2d_forward(activation_type("adaptive_avg_pool2d", {&x, &y}),
                                       x.data_ptr(), pool_shape(x.shape(), y.shape(), {}),
                                       y.data_ptr(), on.stream);
}

void CudaBackend::adaptive_avg_pool2d_backward(const Tensor& grad_y, Tensor& grad_x) {
  OnDevice on(grad_x, "adaptive_avg_pool2d_backward");
  kernels::adaptive_avg_pool2d_backward(
      activation_type("adaptive_avg_pool2d_backward", {&grad_y, &grad_x}), grad_y.data_ptr(),
      pool_shape(grad_x.shape(), grad_y.shape(), {}), grad_x.data_ptr(), on.stream);
}

}  // namespace tandem::cuda
