// Batch normalisation through oneDNN (scale = gamma, shift = beta), primitives
// cached per shape. Statistics are per channel over (N, H, W). Channels-last tensors go to
// batch_norm_channels_last.cpp; bfloat16 NCHW ones run the float32 primitive on a widened copy
// (engine/cpu/float_types.h), so their statistics are float32's on the same values. The running
// statistics move after the batch's are known, on every path (update_running below).

#include <bit>
#include <cstdint>

#include "engine/cpu/batch_norm_channels_last.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/dnnl_context.h"
#include "engine/cpu/dnnl_primitive_descs.h"
#include "engine/cpu/float_types.h"
#include "engine/ops/factory.h"
#include "engine/running_statistics.h"

namespace tandem::cpu {
namespace {

namespace ctx = dnnl_context;
using dnnl::memory;
using dnnl::normalization_flags;

struct BatchNormPrimitives {
  dnnl::batch_normalization_forward::primitive_desc training_pd;
  dnnl::batch_normalization_forward training;
  dnnl::batch_normalization_forward::primitive_desc inference_pd;
  dnnl::batch_normalization_forward inference;
  dnnl::batch_normalization_backward::primitive_desc backward_pd;
  dnnl::batch_normalization_backward backward;
};

// x: (N, C, H, W) in `format`. On plain NCHW oneDNN 2.6 takes its slow reference-like path
// (ncsp_bnorm); on nhwc its vectorised one (shared/notes: 4-5x faster).
BatchNormPrimitives create(const Shape& x, MemoryFormat format, float eps) {
  const memory::desc x_md = ctx::format_desc(x, format);
  const auto affine = normalization_flags::use_scale | normalization_flags::use_shift;
  const auto& attr = ctx::attributes();
  const auto training_pd =
      ctx::batch_norm_forward_pd(dnnl::prop_kind::forward_training, x_md, eps, affine, attr);
  const auto inference_pd =
      ctx::batch_norm_forward_pd(dnnl::prop_kind::forward_inference, x_md, eps,
                                 affine | normalization_flags::use_global_stats, attr);
  const auto backward_pd = ctx::batch_norm_backward_pd(x_md, eps, affine, attr, training_pd);
  return {training_pd,  dnnl::batch_normalization_forward(training_pd),
          inference_pd, dnnl::batch_normalization_forward(inference_pd),
          backward_pd,  dnnl::batch_normalization_backward(backward_pd)};
}

std::shared_ptr<const BatchNormPrimitives> primitives_for(const Tensor& x, float eps) {
  static ctx::PrimitiveCache<BatchNormPrimitives> cache;
  const MemoryFormat format = x.memory_format();
  // eps by its bits: std::to_string prints 6 decimals, so 1e-7 and 1e-8 would share a primitive.
  const std::string key = shape_str(x.shape()) + memory_format_name(format) + "eps" +
                          std::to_string(std::bit_cast<uint32_t>(eps));
  return cache.get(key, [&] { return create(x.shape(), format, eps); });
}

// Batch statistics into save_mean and save_var (biased), y normalised with them.
void forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                      Tensor& y, Tensor& save_mean, Tensor& save_var) {
  if (x.memory_format() == MemoryFormat::ChannelsLast) {  // Note [Channels-last batch norm]
    return channels_last::batch_norm_forward_training(x, gamma, beta, eps, false, y, save_mean,
                                                      save_var);
  }
  check_kernel_dtypes("batch_norm", x.dtype(), {&y});
  if (x.dtype() == DType::BFloat16) {
    Tensor y_float = float_like(y);
    forward_training(widened(x), gamma, beta, eps, y_float, save_mean, save_var);
    return narrow_into(y_float, y);
  }
  const auto p = primitives_for(x, eps);
  ctx::execute(p->training, p->training_pd.scratchpad_desc(),
               {{DNNL_ARG_SRC, ctx::wrap(x)},
                {DNNL_ARG_SCALE, ctx::wrap(gamma)},
                {DNNL_ARG_SHIFT, ctx::wrap(beta)},
                {DNNL_ARG_DST, ctx::wrap(y)},
                {DNNL_ARG_MEAN, ctx::wrap(save_mean)},
                {DNNL_ARG_VARIANCE, ctx::wrap(save_var)}});
}

// Note [Running statistics] (engine/running_statistics.h): oneDNN keeps none, so they move here,
// one channel at a time, with the arithmetic the CUDA kernels share.
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
// variance, what oneDNN's backward takes.
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
  if (x.memory_format() == MemoryFormat::ChannelsLast) {
    return channels_last::batch_norm_forward_inference(x, gamma, beta, running_mean, running_var,
                                                       eps, y);
  }
  check_kernel_dtypes("batch_norm", x.dtype(), {&y});
  if (x.dtype() == DType::BFloat16) {
    Tensor y_float = float_like(y);
    batch_norm_forward_inference(widened(x), gamma, beta, running_mean, running_var, eps, y_float);
    return narrow_into(y_float, y);
  }
  const auto p = primitives_for(x, eps);
  ctx::execute(p->inference, p->inference_pd.scratchpad_desc(),
               {{DNNL_ARG_SRC, ctx::wrap(x)},
                {DNNL_ARG_SCALE, ctx::wrap(gamma)},
                {DNNL_ARG_SHIFT, ctx::wrap(beta)},
                {DNNL_ARG_MEAN, ctx::wrap(running_mean)},
                {DNNL_ARG_VARIANCE, ctx::wrap(running_var)},
                {DNNL_ARG_DST, ctx::wrap(y)}});
}

void CpuBackend::batch_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& gamma,
                                     const Tensor& save_mean, const Tensor& save_var, float eps,
                                     Tensor& grad_x, Tensor& grad_gamma, Tensor& grad_beta) {
  if (x.memory_format() == MemoryFormat::ChannelsLast) {
    return channels_last::batch_norm_backward(grad_y, Tensor(), x, gamma, save_mean, save_var, eps,
                                              grad_x, grad_gamma, grad_beta);
  }
  check_kernel_dtypes("batch_norm_backward", x.dtype(), {&grad_y, &grad_x});
  if (x.dtype() == DType::BFloat16) {
    Tensor grad_x_float = float_like(grad_x);
    batch_norm_backward(widened(grad_y), widened(x), gamma, save_mean, save_var, eps, grad_x_float,
                        grad_gamma, grad_beta);
    return narrow_into(grad_x_float, grad_x);
  }
  const auto p = primitives_for(x, eps);
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, ctx::wrap(x)},
                                          {DNNL_ARG_MEAN, ctx::wrap(save_mean)},
                                          {DNNL_ARG_VARIANCE, ctx::wrap(save_var)},
                                          {DNNL_ARG_DIFF_DST, ctx::wrap(grad_y)},
                                          {DNNL_ARG_SCALE, ctx::wrap(gamma)},
                                          {DNNL_ARG_DIFF_SRC, ctx::wrap(grad_x)},
                                          {DNNL_ARG_DIFF_SCALE, ctx::wrap(grad_gamma)},
                                          {DNNL_ARG_DIFF_SHIFT, ctx::wrap(grad_beta)}};
  const Tensor unused_shift = ctx::kBatchNormBackwardTakesShift ? zeros_like(gamma) : Tensor();
  if (unused_shift.defined()) args.emplace(DNNL_ARG_SHIFT, ctx::wrap(unused_shift));
  ctx::execute(p->backward, p->backward_pd.scratchpad_desc(), std::move(args));
}

bool CpuBackend::fuses_batch_norm_relu(const Tensor& x) const {
  return x.memory_format() == MemoryFormat::ChannelsLast;
}

void CpuBackend::batch_norm_relu_forward_training(const Tensor& x, const Tensor& gamma,
                                                  const Tensor& beta,
                                                  const BatchNormRunning& running, float eps,
                                                  Tensor& y, Tensor& save_mean, Tensor& save_var) {
  channels_last::batch_norm_forward_training(x, gamma, beta, eps, true, y, save_mean, save_var);
  update_running(running, x, save_mean, save_var);
}

void CpuBackend::batch_norm_relu_backward(const Tensor& grad_y, const Tensor& y, const Tensor& x,
                                          const Tensor& gamma, const Tensor& save_mean,
                                          const Tensor& save_var, float eps, Tensor& grad_x,
                                          Tensor& grad_gamma, Tensor& grad_beta) {
  channels_last::batch_norm_backward(grad_y, y, x, gamma, save_mean, save_var, eps, grad_x,
                                     grad_gamma, grad_beta);
}

}  // namespace tandem::cpu
