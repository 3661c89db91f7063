#pragma once
/// The update of batch norm's running statistics for one channel, shared by the CPU backend and
/// the CUDA backend's own kernels (engine/cuda/kernels/batch_norm.h), so that both compute it bit
/// for bit alike. No CUDA include: the host compiler builds it too (engine/host_device.h).
///
/// Note [Running statistics]: torch.nn.BatchNorm2d's semantics. A training batch norm moves
///   running_mean ← (1 − momentum) · running_mean + momentum · mean
///   running_var  ← (1 − momentum) · running_var  + momentum · var · count / (count − 1)
/// with the batch's mean and biased variance over count = N · H · W values per channel, so
/// running_var holds the unbiased variance. The kernel that computes the batch statistics applies
/// it (Backend::batch_norm_forward_training takes the running tensors and the momentum), rather
/// than the op front-end composing it from elementwise ops: that cost nine kernel launches per
/// batch norm on a GPU. The arithmetic is what those ops did, each product and sum rounded to
/// float32 on its own (the factor count / (count − 1) too), so the CPU's running statistics are
/// bit for bit what they were. Neither compiler may fuse a product into the sum (an FMA rounds
/// once): on the device __fmul_rn/__fadd_rn are never contracted; on the host the products pass
/// through volatile, since GCC contracts a * b + c in C++ wherever the target has FMA.
/// torch's momentum=None (a cumulative average) is not offered: BatchNorm2dConfig's momentum is a
/// float.

#include <cstdint>

#include "engine/host_device.h"

namespace tandem {

/// (1 − momentum) · running + momentum · batch, each product rounded before the sum.
TANDEM_HD inline float running_average(float running, float batch, float momentum) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(__fmul_rn(running, 1.0f - momentum), __fmul_rn(batch, momentum));
#else
  const volatile float kept = running * (1.0f - momentum);
  const volatile float moved = batch * momentum;
  return kept + moved;
#endif
}

/// The unbiased variance of `count` values (count > 1) from their biased variance.
TANDEM_HD inline float unbiased_variance(float biased, int64_t count) {
  const float factor = static_cast<float>(count) / static_cast<float>(count - 1);
#ifdef __CUDA_ARCH__
  return __fmul_rn(biased, factor);
#else
  return biased * factor;
#endif
}

}  // namespace tandem
