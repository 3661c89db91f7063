// Batch normalisation on the CPU: the channels-last kernels of batch_norm_channels_last.cpp
// (Note [Channels-last batch norm]) for every layout, NCHW tensors on channels-last copies (Note
// [Batch norm on NCHW]); the running statistics move after the batch's are known (update_running
// below).
//
// Note [Batch norm on NCHW]: oneDNN's batch norm on plain layouts (ncsp_bnorm) loses its
// statistics' accuracy when a channel's mean is large against its spread, and oneDNN 3.2's more
// than 2.6's: one channel of a freshly initialised ResNet-20 (layer3.2.bn1) got a bias gradient
// 2 % off the channels-last kernels' (ChannelsLast.ResNet20TrainingFollowsTheNchwModel failed),
// and at mean 8 and spread 0.01 the two layouts' input gradients were 20 % apart with 3.2 (12 %
// with 2.6; BatchNorm.NchwAndChannelsLastAgreeWhenTheMeanDwarfsTheSpread tests the case). The
// channels-last kernels update their statistics with Chan et al.'s formula, which does not cancel,
// so NCHW tensors go through them on channels-last copies: three copies forward and backward (x, y;
// grad_y, x, grad_x) on a layout that is not the CPU's default (Note [Memory formats]), for one
// numerics on both layouts and every oneDNN.

#include <cstdint>

#include "engine/autograd/grad_mode.h"
#include "engine/cpu/batch_norm_channels_last.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/ops/factory.h"
#include "engine/running_statistics.h"

namespace tandem::cpu {
namespace {

constexpr MemoryFormat kChannelsLast = MemoryFormat::ChannelsLast;

bool is_channels_last(const Tensor& t) {
  return t.memory_format() == kChannelsLast;
}

// A channels-last copy of an NCHW tensor (Note [Batch norm on NCHW]), outside autograd.
Tensor channels_last_copy(const Tensor& t) {
  const autograd::NoGradGuard no_grad;
  return t.contiguous(kChannelsLast);
}

Tensor channels_last_buffer(const Tensor& like) {
  return empty(like.shape(), {.dtype = like.dtype(), .memory_format = kChannelsLast});
}

void copy_into(const Tensor& from, Tensor& to) {
  const autograd::NoGradGuard no_grad;
  to.copy_(from);
}

// Batch statistics into save_mean and save_var (biased), y normalised with them.
void forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                      Tensor& y, Tensor& save_mean, Tensor& save_var) {
  const Tensor no_residual;
  if (is_channels_last(x)) {  // Note [Channels-last batch norm]
    return channels_last::batch_norm_forward_training(x, gamma, beta, eps, false, no_residual, y,
                                                      save_mean, save_var);
  }
  Tensor y_copy = channels_last_buffer(y);
  channels_last::batch_norm_forward_training(channels_last_copy(x), gamma, beta, eps, false,
                                             no_residual, y_copy, save_mean, save_var);
  copy_into(y_copy, y);
}

// Note [Running statistics] (engine/running_statistics.h): the kernels keep none, so they move
// here, one channel at a time, with the arithmetic the CUDA kernels share.
void update_running(const BatchNormRunning& running, const Tensor& x, const Tensor& mean,
                    const Tensor& var) {
  if (!running.mean.defined()) return;
  const int64_t count = x.size(0) * x.size(2) * x.size(3);
  float* running_mean = running.mean.data<float>();
  float* running_var = running.var.data<float>();
  const float* batch_mean = mean.data<float>();
  const float* batch_var = var.data<float>();
  for (int64_t c = 0; c < mean.numel(); ++c) {
    running_mean[c] = running_average(running_mean[c], batch_mean[c], running.momentum);
    running_var[c] =
        running_average(running_var[c], unbiased_variance(batch_var[c], count), running.momentum);
  }
}

}  // namespace

// Note [Batch-norm statistics] (engine/backend/backend.h): the CPU's saved spread is the biased
// variance, what the backward kernels take.
void CpuBackend::batch_norm_forward_training(const Tensor& x, const Tensor& gamma,
                                             const Tensor& beta, const BatchNormRunning& running,
                                             float eps, Tensor& y, Tensor& save_mean,
                                             Tensor& save_var) {
  forward_training(x, gamma, beta, eps, y, save_mean, save_var);
  update_running(running, x, save_mean, save_var);
}

void CpuBackend::batch_norm_forward_inference(const Tensor& x, const Tensor& gamma,
                                              const Tensor& beta, const Tensor& running_mean,
                                              const Tensor& running_var, float eps, Tensor& y) {
  if (is_channels_last(x)) {
    return channels_last::batch_norm_forward_inference(x, gamma, beta, running_mean, running_var,
                                                       eps, y);
  }
  Tensor y_copy = channels_last_buffer(y);
  channels_last::batch_norm_forward_inference(channels_last_copy(x), gamma, beta, running_mean,
                                              running_var, eps, y_copy);
  copy_into(y_copy, y);
}

void CpuBackend::batch_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& gamma,
                                     const Tensor& save_mean, const Tensor& save_var, float eps,
                                     Tensor& grad_x, Tensor& grad_gamma, Tensor& grad_beta) {
  Tensor no_residual;
  if (is_channels_last(x)) {
    return channels_last::batch_norm_backward(grad_y, Tensor(), x, gamma, save_mean, save_var, eps,
                                              grad_x, grad_gamma, grad_beta, no_residual);
  }
  Tensor grad_x_copy = channels_last_buffer(grad_x);
  channels_last::batch_norm_backward(channels_last_copy(grad_y), Tensor(), channels_last_copy(x),
                                     gamma, save_mean, save_var, eps, grad_x_copy, grad_gamma,
                                     grad_beta, no_residual);
  copy_into(grad_x_copy, grad_x);
}

bool CpuBackend::fuses_batch_norm_relu(const Tensor& x) const {
  return x.memory_format() == MemoryFormat::ChannelsLast;
}

// Only channels-last tensors come here (fuses_batch_norm_relu): the ReLU, and a residual block's
// shortcut when `residual` is defined, in the kernels' one pass.
void CpuBackend::batch_norm_relu_forward_training(const Tensor& x, const Tensor& residual,
                                                  const Tensor& gamma, const Tensor& beta,
                                                  const BatchNormRunning& running, float eps,
                                                  Tensor& y, Tensor& save_mean, Tensor& save_var) {
  channels_last::batch_norm_forward_training(x, gamma, beta, eps, true, residual, y, save_mean,
                                             save_var);
  update_running(running, x, save_mean, save_var);
}

void CpuBackend::batch_norm_relu_backward(const Tensor& grad_y, const Tensor& y, const Tensor& x,
                                          const Tensor& gamma, const Tensor& save_mean,
                                          const Tensor& save_var, float eps, Tensor& grad_x,
                                          Tensor& grad_gamma, Tensor& grad_beta,
                                          Tensor& grad_residual) {
  channels_last::batch_norm_backward(grad_y, y, x, gamma, save_mean, save_var, eps, grad_x,
                                     grad_gamma, grad_beta, grad_residual);
}

}  // namespace tandem::cpu
