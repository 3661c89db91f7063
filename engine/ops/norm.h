#pragma once
/// Batch normalisation over (N, H, W) for each channel of an (N, C, H, W) input.

#include "engine/tensor.h"

namespace tandem {

struct BatchNormOptions {
  bool training = true;
  float momentum = 0.1f;  ///< running = (1 - momentum) * running + momentum * batch, as PyTorch
  float eps = 1e-5f;
  /// Returns relu(batch_norm(x)): one pass forward and backward where the backend fuses the
  /// two (the CPU on channels-last input), else the two ops one after the other.
  bool fuse_relu = false;
};

/// Training: normalises with batch statistics and, when running_mean/var are defined, updates
/// them in place (unbiased variance for running_var, as PyTorch). Inference: normalises with
/// the running statistics. gamma and beta (C) may require grad; running stats never do.
/// x may be bfloat16 (mixed precision's activations): the output and grad_x are then bfloat16,
/// while gamma, beta, the running statistics and their gradients stay float32.
Tensor batch_norm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                    const Tensor& running_mean, const Tensor& running_var,
                    const BatchNormOptions& options = {});

/// relu(batch_norm2d(x) + residual): a residual block's second batch norm, shortcut sum and ReLU,
/// in one pass forward and one backward where the backend fuses them (as fuse_relu; the CPU on
/// channels-last input), else batch_norm2d then add_relu. residual: x's shape, dtype and device;
/// its gradient is the ReLU's. options.fuse_relu is implied.
Tensor batch_norm2d_add_relu(const Tensor& x, const Tensor& residual, const Tensor& gamma,
                             const Tensor& beta, const Tensor& running_mean,
                             const Tensor& running_var, const BatchNormOptions& options = {});

}  // namespace tandem
