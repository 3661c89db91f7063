// Batch normalisation (statistics per channel over (N, H, W)): cuDNN's spatial mode for
// float32, Tandem's own kernels (batch_norm.cu) for bfloat16 and for the fused batch norm + ReLU.
//
// Note [Own batch-norm kernels]: Note [bfloat16 activations] wants x, y and their gradients in
// bfloat16 with gamma, beta and the statistics in float32. cuDNN's legacy batch-norm API
// documents that mix for half but not for bfloat16 (PyTorch, too, keeps bfloat16 batch norm off
// cuDNN), so bfloat16 runs Tandem's own kernels, whose bodies the unit tests run on a CPU grid
// (kernels/batch_norm.h). They also fuse the ReLU of batch_norm_relu_* into the same pass (for
// either dtype). float32 batch norm stays on cuDNN, bit for bit what it was.
//
// Note [Batch-norm statistics]: cuDNN saves the inverse standard deviation 1/sqrt(var + eps)
// for backward; the Backend interface saves the biased variance (what oneDNN and the op
// front-end use). The forward converts with var = 1/inv_std² - eps, the backward converts back;
// both are one tiny kernel over C values, and the round trip costs a few float32 ulps.

#include "engine/cuda/activation_type.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cudnn_check.h"
#include "engine/cuda/cudnn_descriptors.h"
#include "engine/cuda/handles.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/on_device.h"
#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/cuda_check.h"

namespace tandem::cuda {
namespace {

constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL;

Shape per_channel(const Tensor& x) {
  return {1, x.size(1), 1, 1};
}

// x: (N, C, H, W) as the own kernels' (N, C, HW)
kernels::NormShape norm_shape(const Tensor& x) {
  return {x.size(0), x.size(1), x.size(2) * x.size(3)};
}

// Note [Own batch-norm kernels]
void own_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                          bool relu, Tensor& y, Tensor& save_mean, Tensor& save_var,
                          const char* op) {
  OnDevice on(y, op);
  kernels::batch_norm_forward_training(activation_type(op, {&x, &y}), x.data_ptr(), norm_shape(x),
                                       gamma.data<float>(), beta.data<float>(), eps, relu,
                                       y.data_ptr(), save_mean.data<float>(),
                                       save_var.data<float>(), on.stream);
}

// y: the fused ReLU's output, or undefined for batch norm alone.
void own_backward(const Tensor& grad_y, const Tensor& y, const Tensor& x, const Tensor& gamma,
                  const Tensor& save_mean, const Tensor& save_var, float eps, Tensor& grad_x,
                  Tensor& grad_gamma, Tensor& grad_beta, const char* op) {
  OnDevice on(grad_x, op);
  kernels::batch_norm_backward(activation_type(op, {&grad_y, &y, &x, &grad_x}), grad_y.data_ptr(),
                               y.defined() ? y.data_ptr() : nullptr, x.data_ptr(), norm_shape(x),
                               gamma.data<float>(), save_mean.data<float>(), save_var.data<float>(),
                               eps, grad_x.data_ptr(), grad_gamma.data<float>(),
                               grad_beta.data<float>(), on.stream);
}

}  // namespace

void CudaBackend::batch_norm_forward_training(const Tensor& x, const Tensor& gamma,
                                              const Tensor& beta, float eps, Tensor& y,
                                              Tensor& save_mean, Tensor& save_var) {
  if (x.dtype() == DType::BFloat16) {
    own_forward_training(x, gamma, beta, eps, false, y, save_mean, save_var, "batch_norm2d");
    return;
  }
  OnDevice on(y, "batch_norm2d");
  const TensorDescriptor x_desc(x.shape());
  const TensorDescriptor channel_desc(per_channel(x));
  const int64_t channels = x.size(1);
  const DeviceBuffer inv_std(on.index, static_cast<size_t>(channels) * sizeof(float));
  const float one = 1.0f, zero = 0.0f;
  // Running statistics are the op front-end's (null here): it updates them with its own ops.
  CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
      cudnn_handle(on.index), kMode, &one, &zero, x_desc.get(), x.data<float>(), x_desc.get(),
      y.data<float>(), channel_desc.get(), gamma.data<float>(), beta.data<float>(), 1.0, nullptr,
      nullptr, static_cast<double>(eps), save_mean.data<float>(), inv_std.data()));
  kernels::inv_std_to_var(static_cast<const float*>(inv_std.data()), eps, save_var.data<float>(),
                          channels, on.stream);
}

void CudaBackend::batch_norm_forward_inference(const Tensor& x, const Tensor& gamma,
                                               const Tensor& beta, const Tensor& running_mean,
                                               const Tensor& running_var, float eps, Tensor& y) {
  OnDevice on(y, "batch_norm2d");
  if (x.dtype() == DType::BFloat16) {  // Note [Own batch-norm kernels]
    kernels::batch_norm_forward_inference(activation_type("batch_norm2d", {&x, &y}), x.data_ptr(),
                                          norm_shape(x), gamma.data<float>(), beta.data<float>(),
                                          running_mean.data<float>(), running_var.data<float>(),
                                          eps, y.data_ptr(), on.stream);
    return;
  }
  const TensorDescriptor x_desc(x.shape());
  const TensorDescriptor channel_desc(per_channel(x));
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
      cudnn_handle(on.index), kMode, &one, &zero, x_desc.get(), x.data<float>(), x_desc.get(),
      y.data<float>(), channel_desc.get(), gamma.data<float>(), beta.data<float>(),
      running_mean.data<float>(), running_var.data<float>(), static_cast<double>(eps)));
}

void CudaBackend::batch_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& gamma,
                                      const Tensor& save_mean, const Tensor& save_var, float eps,
                                      Tensor& grad_x, Tensor& grad_gamma, Tensor& grad_beta) {
  if (x.dtype() == DType::BFloat16) {
    own_backward(grad_y, Tensor(), x, gamma, save_mean, save_var, eps, grad_x, grad_gamma,
                 grad_beta, "batch_norm2d_backward");
    return;
  }
  OnDevice on(grad_x, "batch_norm2d_backward");
  const TensorDescriptor x_desc(x.shape());
  const TensorDescriptor channel_desc(per_channel(x));
  const int64_t channels = x.size(1);
  const DeviceBuffer inv_std(on.index, static_cast<size_t>(channels) * sizeof(float));
  kernels::var_to_inv_std(save_var.data<float>(), eps, static_cast<float*>(inv_std.data()),
                          channels, on.stream);
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnBatchNormalizationBackward(
      cudnn_handle(on.index), kMode, &one, &zero, &one, &zero, x_desc.get(), x.data<float>(),
      x_desc.get(), grad_y.data<float>(), x_desc.get(), grad_x.data<float>(), channel_desc.get(),
      gamma.data<float>(), grad_gamma.data<float>(), grad_beta.data<float>(),
      static_cast<double>(eps), save_mean.data<float>(), inv_std.data()));
}

bool CudaBackend::fuses_batch_norm_relu(const Tensor& x) const {
  return x.dtype() == DType::BFloat16;
}

void CudaBackend::batch_norm_relu_forward_training(const Tensor& x, const Tensor& gamma,
                                                   const Tensor& beta, float eps, Tensor& y,
                                                   Tensor& save_mean, Tensor& save_var) {
  own_forward_training(x, gamma, beta, eps, true, y, save_mean, save_var, "batch_norm2d_relu");
}

void CudaBackend::batch_norm_relu_backward(const Tensor& grad_y, const Tensor& y, const Tensor& x,
                                           const Tensor& gamma, const Tensor& save_mean,
                                           const Tensor& save_var, float eps, Tensor& grad_x,
                                           Tensor& grad_gamma, Tensor& grad_beta) {
  TANDEM_CHECK(y.defined(), "[batch_norm2d_relu_backward] needs the forward's output y");
  own_backward(grad_y, y, x, gamma, save_mean, save_var, eps, grad_x, grad_gamma, grad_beta,
               "batch_norm2d_relu_backward");
}

}  // namespace tandem::cuda
