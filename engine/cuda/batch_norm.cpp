// Batch normalisation (statistics per channel over (N, H, W)): cuDNN's spatial mode for
// float32, Tandem's own kernels (batch_norm.cu) for bfloat16 and for the fused batch norm + ReLU.
//
// Note [Own batch-norm kernels]: Note [bfloat16 activations] wants x, y and their gradients in
// bfloat16 with gamma, beta and the statistics in float32. cuDNN's legacy batch-norm API
// documents that mix for half but not for bfloat16 (PyTorch, too, keeps bfloat16 batch norm off
// cuDNN), so bfloat16 runs Tandem's own kernels, whose bodies the unit tests run on a CPU grid
// (kernels/batch_norm.h, Note [Batch-norm kernels]). They also fuse the ReLU of
// batch_norm_relu_* (and its residual) into the same pass (for either dtype). float32 batch norm
// stays on cuDNN.
//
// Both save what cuDNN saves, the mean and 1 / sqrt(var + eps) (Note [Batch-norm statistics] in
// engine/backend/backend.h), and both update the running statistics inside the training forward
// (Note [Running statistics] in engine/running_statistics.h): cuDNN through its
// exponentialAverageFactor (its running variance is the unbiased one, as PyTorch's), the own
// kernels in their finalize step. One training forward is thus one cuDNN call or three kernels.

#include <initializer_list>

#include "engine/cuda/activation_type.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cudnn_check.h"
#include "engine/cuda/cudnn_descriptors.h"
#include "engine/cuda/handles.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/on_device.h"
#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/device.h"

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

kernels::RunningStatisticsPointers running_pointers(const BatchNormRunning& running) {
  if (!running.mean.defined()) return {};
  return {running.mean.data<float>(), running.var.data<float>(), running.momentum};
}

// The own kernels' plan for x: (N, C, H, W), in packs where every activation of the call allows
// them (kernels/norm_plan.h).
kernels::NormPlan plan_for(int device, const Tensor& x,
                           std::initializer_list<const void*> activations) {
  const kernels::NormShape s = norm_shape(x);
  const int pack = kernels::norm_pack(s, static_cast<int>(dtype_size(x.dtype())), activations);
  return kernels::plan_norm(s, pack, device_properties(device).multiProcessorCount);
}

const void* data_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr() : nullptr;
}

// Note [Own batch-norm kernels]
// residual: undefined, or (with relu) added before the ReLU.
void own_forward_training(const Tensor& x, const Tensor& residual, const Tensor& gamma,
                          const Tensor& beta, const BatchNormRunning& running, float eps, bool relu,
                          Tensor& y, Tensor& save_mean, Tensor& save_inv_std, const char* op) {
  OnDevice on(y, op);
  const kernels::NormPlan plan =
      plan_for(on.index, x, {x.data_ptr(), data_or_null(residual), y.data_ptr()});
  // Freed at the end of the call, but only reused by work queued after the kernels: stream order.
  const DeviceBuffer workspace(on.index,
                               kernels::norm_workspace_floats(plan, x.size(1)) * sizeof(float));
  kernels::batch_norm_forward_training(
      activation_type(op, {&x, &residual, &y}), x.data_ptr(), norm_shape(x), plan,
      gamma.data<float>(), beta.data<float>(), eps, relu, data_or_null(residual),
      running_pointers(running), y.data_ptr(), save_mean.data<float>(), save_inv_std.data<float>(),
      static_cast<float*>(workspace.data()), on.stream);
}

// y: the fused ReLU's output, or undefined for batch norm alone; grad_residual: undefined, or
// (with y) the residual's gradient.
void own_backward(const Tensor& grad_y, const Tensor& y, const Tensor& x, const Tensor& gamma,
                  const Tensor& save_mean, const Tensor& save_inv_std, Tensor& grad_x,
                  Tensor& grad_gamma, Tensor& grad_beta, Tensor& grad_residual, const char* op) {
  OnDevice on(grad_x, op);
  const kernels::NormPlan plan = plan_for(on.index, x,
                                          {grad_y.data_ptr(), data_or_null(y), x.data_ptr(),
                                           grad_x.data_ptr(), data_or_null(grad_residual)});
  const DeviceBuffer workspace(on.index,
                               kernels::norm_workspace_floats(plan, x.size(1)) * sizeof(float));
  kernels::batch_norm_backward(
      activation_type(op, {&grad_y, &y, &x, &grad_x, &grad_residual}), grad_y.data_ptr(),
      data_or_null(y), x.data_ptr(), norm_shape(x), plan, gamma.data<float>(),
      save_mean.data<float>(), save_inv_std.data<float>(), grad_x.data_ptr(),
      grad_residual.defined() ? grad_residual.data_ptr() : nullptr, grad_gamma.data<float>(),
      grad_beta.data<float>(), static_cast<float*>(workspace.data()), on.stream);
}

}  // namespace

void CudaBackend::batch_norm_forward_training(const Tensor& x, const Tensor& gamma,
                                              const Tensor& beta, const BatchNormRunning& running,
                                              float eps, Tensor& y, Tensor& save_mean,
                                              Tensor& save_inv_std) {
  if (x.dtype() == DType::BFloat16) {
    own_forward_training(x, Tensor(), gamma, beta, running, eps, false, y, save_mean, save_inv_std,
                         "batch_norm2d");
    return;
  }
  OnDevice on(y, "batch_norm2d");
  const TensorDescriptor x_desc(x.shape());
  const TensorDescriptor channel_desc(per_channel(x));
  const float one = 1.0f, zero = 0.0f;
  const bool keeps_running = running.mean.defined();
  // Without running statistics cuDNN takes null pointers, and then ignores the factor.
  CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
      cudnn_handle(on.index), kMode, &one, &zero, x_desc.get(), x.data<float>(), x_desc.get(),
      y.data<float>(), channel_desc.get(), gamma.data<float>(), beta.data<float>(),
      keeps_running ? static_cast<double>(running.momentum) : 1.0,
      keeps_running ? running.mean.data<float>() : nullptr,
      keeps_running ? running.var.data<float>() : nullptr, static_cast<double>(eps),
      save_mean.data<float>(), save_inv_std.data<float>()));
}

void CudaBackend::batch_norm_forward_inference(const Tensor& x, const Tensor& gamma,
                                               const Tensor& beta, const Tensor& running_mean,
                                               const Tensor& running_var, float eps, Tensor& y) {
  OnDevice on(y, "batch_norm2d");
  if (x.dtype() == DType::BFloat16) {  // Note [Own batch-norm kernels]
    const kernels::NormShape s = norm_shape(x);
    const DeviceBuffer inv_std(on.index, static_cast<size_t>(x.size(1)) * sizeof(float));
    kernels::batch_norm_forward_inference(
        activation_type("batch_norm2d", {&x, &y}), x.data_ptr(), s,
        kernels::norm_pack(s, static_cast<int>(dtype_size(x.dtype())),
                           {x.data_ptr(), y.data_ptr()}),
        gamma.data<float>(), beta.data<float>(), running_mean.data<float>(),
        running_var.data<float>(), eps, static_cast<float*>(inv_std.data()), y.data_ptr(),
        on.stream);
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
                                      const Tensor& save_mean, const Tensor& save_inv_std,
                                      float eps, Tensor& grad_x, Tensor& grad_gamma,
                                      Tensor& grad_beta) {
  if (x.dtype() == DType::BFloat16) {
    Tensor no_residual;
    own_backward(grad_y, Tensor(), x, gamma, save_mean, save_inv_std, grad_x, grad_gamma, grad_beta,
                 no_residual, "batch_norm2d_backward");
    return;
  }
  OnDevice on(grad_x, "batch_norm2d_backward");
  const TensorDescriptor x_desc(x.shape());
  const TensorDescriptor channel_desc(per_channel(x));
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnBatchNormalizationBackward(
      cudnn_handle(on.index), kMode, &one, &zero, &one, &zero, x_desc.get(), x.data<float>(),
      x_desc.get(), grad_y.data<float>(), x_desc.get(), grad_x.data<float>(), channel_desc.get(),
      gamma.data<float>(), grad_gamma.data<float>(), grad_beta.data<float>(),
      static_cast<double>(eps), save_mean.data<float>(), save_inv_std.data<float>()));
}

bool CudaBackend::fuses_batch_norm_relu(const Tensor& x) const {
  return x.dtype() == DType::BFloat16;
}

void CudaBackend::batch_norm_relu_forward_training(const Tensor& x, const Tensor& residual,
                                                   const Tensor& gamma, const Tensor& beta,
                                                   const BatchNormRunning& running, float eps,
                                                   Tensor& y, Tensor& save_mean,
                                                   Tensor& save_inv_std) {
  own_forward_training(x, residual, gamma, beta, running, eps, true, y, save_mean, save_inv_std,
                       residual.defined() ? "batch_norm2d_add_relu" : "batch_norm2d_relu");
}

void CudaBackend::batch_norm_relu_backward(const Tensor& grad_y, const Tensor& y, const Tensor& x,
                                           const Tensor& gamma, const Tensor& save_mean,
                                           const Tensor& save_inv_std, float /*eps*/,
                                           Tensor& grad_x, Tensor& grad_gamma, Tensor& grad_beta,
                                           Tensor& grad_residual) {
  TANDEM_CHECK(y.defined(), "[batch_norm2d_relu_backward] needs the forward's output y");
  own_backward(
      grad_y, y, x, gamma, save_mean, save_inv_std, grad_x, grad_gamma, grad_beta, grad_residual,
      grad_residual.defined() ? "batch_norm2d_add_relu_backward" : "batch_norm2d_relu_backward");
}

}  // namespace tandem::cuda
