// Batch normalisation through cuDNN (spatial mode: statistics per channel over (N, H, W)).
//
// Note [Batch-norm statistics]: cuDNN saves the inverse standard deviation 1/sqrt(var + eps)
// for backward; the Backend interface saves the biased variance (what oneDNN and the op
// front-end use). The forward converts with var = 1/inv_std² - eps, the backward converts back;
// both are one tiny kernel over C values, and the round trip costs a few float32 ulps.

#include "engine/cuda/caching_allocator.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cudnn_check.h"
#include "engine/cuda/cudnn_descriptors.h"
#include "engine/cuda/handles.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/on_device.h"

namespace tandem::cuda {
namespace {

constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL;

Shape per_channel(const Tensor& x) {
  return {1, x.size(1), 1, 1};
}

}  // namespace

void CudaBackend::batch_norm_forward_training(const Tensor& x, const Tensor& gamma,
                                              const Tensor& beta, float eps, Tensor& y,
                                              Tensor& save_mean, Tensor& save_var) {
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

}  // namespace tandem::cuda
