#pragma once
/// Batch norm on channels-last (NHWC) tensors in plain C++: rows of C contiguous channels,
/// statistics per channel over the N*H*W rows. Note [Channels-last batch norm] in the .cpp
/// says why these are not oneDNN's.

#include "engine/tensor.h"

namespace tandem::cpu::channels_last {

/// x, y: (N, C, H, W) channels-last, float32 or bfloat16 (one dtype); gamma, beta, save_mean,
/// save_var (biased): (C) float32, as are the gradients of gamma and beta below.
/// relu: y = max(batch_norm(x), 0) in the same pass; with residual (x's shape, format and dtype;
/// undefined: none; only with relu) y = max(batch_norm(x) + residual, 0), a residual block's end.
void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 float eps, bool relu, const Tensor& residual, Tensor& y,
                                 Tensor& save_mean, Tensor& save_var);
/// y = gamma * (x - mean) / sqrt(var + eps) + beta with the given statistics.
void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& mean, const Tensor& var, float eps, Tensor& y);
/// grad_y, x, grad_x (and relu_output): channels-last, of one dtype; the statistics are those of
/// the training forward. relu_output, when defined, is the fused forward's y: grad_y is then the
/// gradient of that ReLU's output, and is taken as zero where y is not positive. grad_residual,
/// when defined (with relu_output), receives that masked gradient: the residual's gradient.
void batch_norm_backward(const Tensor& grad_y, const Tensor& relu_output, const Tensor& x,
                         const Tensor& gamma, const Tensor& save_mean, const Tensor& save_var,
                         float eps, Tensor& grad_x, Tensor& grad_gamma, Tensor& grad_beta,
                         Tensor& grad_residual);

}  // namespace tandem::cpu::channels_last
