#include "nn/batch_norm2d.h"

#include "engine/ops/cast.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/factory.h"

namespace tandem::nn {

BatchNorm2d::BatchNorm2d(const BatchNorm2dConfig& config) : config_(config) {
  TANDEM_CHECK(config.channels > 0, "[BatchNorm2d] channels must be positive, got ",
               config.channels);
  const int64_t c = config.channels;
  weight_ = register_parameter("weight", ones({c}));
  bias_ = register_parameter("bias", zeros({c}));
  running_mean_ = register_buffer("running_mean", zeros({c}));
  running_var_ = register_buffer("running_var", ones({c}));
  num_batches_tracked_ = register_buffer("num_batches_tracked", zeros({}, {.dtype = DType::Int64}));
}

Tensor BatchNorm2d::forward(const Tensor& input) {
  return normalize(input, false, Tensor());
}

Tensor BatchNorm2d::forward_relu(const Tensor& input) {
  return normalize(input, true, Tensor());
}

Tensor BatchNorm2d::forward_add_relu(const Tensor& input, const Tensor& residual) {
  TANDEM_CHECK(residual.defined(), "[BatchNorm2d] forward_add_relu needs a residual");
  return normalize(input, true, residual);
}

Tensor BatchNorm2d::normalize(const Tensor& input, bool relu, const Tensor& residual) {
  if (is_training()) {
    // On the buffer's device, as PyTorch's add_(1): a host read here would stall a GPU at every
    // batch norm of every step (Note [Host syncs] in apps/train_cifar/pending_steps.h).
    add_(num_batches_tracked_, 1.0);
  }
  const BatchNormOptions options{.training = is_training(),
                                 .momentum = config_.momentum,
                                 .eps = config_.eps,
                                 .fuse_relu = relu && !residual.defined()};
  if (reducer_ && is_training()) {
    // SyncBatchNorm computes in float32 only: a bfloat16 input goes through it in float32 and
    // comes back in bfloat16, so the next layer sees the dtype it would have seen without it.
    const Tensor y = sync_batch_norm2d(cast(input, DType::Float32), weight_, bias_, running_mean_,
                                       running_var_, options, reducer_);
    return residual.defined() ? add_relu(cast(y, input.dtype()), residual) : cast(y, input.dtype());
  }
  if (residual.defined()) {
    return batch_norm2d_add_relu(input, residual, weight_, bias_, running_mean_, running_var_,
                                 options);
  }
  return batch_norm2d(input, weight_, bias_, running_mean_, running_var_, options);
}

void BatchNorm2d::reset_own_parameters(Generator&) {
  weight_.fill_(1.0);
  bias_.fill_(0.0);
  running_mean_.fill_(0.0);
  running_var_.fill_(1.0);
  num_batches_tracked_.fill_(0.0);
}

}  // namespace tandem::nn
