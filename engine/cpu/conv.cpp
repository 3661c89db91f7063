// Convolution through oneDNN: forward, backward-data and backward-weights
// primitives, created once per shape and cached.
//
// Note [oneDNN layouts]: channels-last activations (Note [Memory formats]) are given to oneDNN
// as `nhwc` and taken as they are: no reorder between layers, only the weights are reordered into
// the primitive's blocked layout (and their gradient back). That is the default on CPUs.
//
// Plain NCHW activations let oneDNN choose their layout (format_tag::any) instead, and each call
// reorders its inputs in and its output back. On plain layouts oneDNN 2.6 picks gemm:jit
// (im2col); with `any` it picks jit:avx512_core on blocked layouts, which wins at every ResNet-20
// shape even with the reorders (bench_conv2d, N=128, 2 threads, AVX-512, medians of 3, same
// session, 2026-11-22):
//
//   channels, pixels      16, 32x32      32, 16x16      64, 8x8
//   forward    plain      12.1 ms        6.3 ms         5.1 ms
//              blocked    4.8 ms         2.9 ms         2.5 ms
//   fwd + bwd  plain      29.2 ms        18.5 ms        15.0 ms
//              blocked    17.5 ms        11.8 ms        9.3 ms
//
// ("plain" there already had backward-weights blocked: on plain layouts it alone took ~46 ms at
// 16 channels.) Blocked activations kept from layer to layer would save NCHW's reorders too, but
// on AVX-512 the nhwc convolutions are as fast as the blocked ones (a ResNet-20 step's
// convolutions: 96 ms nhwc, 97 ms blocked; ONEDNN_VERBOSE over bench_resnet, 2026-11-23), and
// NHWC is the layout users and GPUs know.

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/dnnl_context.h"
#include "engine/cpu/dnnl_primitive_descs.h"
#include "engine/cpu/float_types.h"
#include "engine/cpu_features.h"

namespace tandem::cpu {
namespace {

namespace ctx = dnnl_context;
using dnnl::memory;

struct ConvPrimitives {
  dnnl::convolution_forward::primitive_desc forward_pd;
  dnnl::convolution_forward forward;
  dnnl::convolution_backward_data::primitive_desc backward_data_pd;
  dnnl::convolution_backward_data backward_data;
  dnnl::convolution_backward_weights::primitive_desc backward_weights_pd;
  dnnl::convolution_backward_weights backward_weights;
};

// x: (N, C, H, W), w: (K, C, R, S), y: (N, K, P, Q). Activations in `format`: channels-last
// ones are taken as they are (nhwc), plain ones in whatever layout oneDNN prefers (Note
// [oneDNN layouts]); weights always in oneDNN's choice.
// `dtype` is that of x, w, y and their gradients; a bias stays float32 (Note [bfloat16
// activations]): oneDNN picks its bf16 kernels (AVX512-BF16, AMX) with float32 accumulation.
ConvPrimitives create(const Shape& x, const Shape& w, const Shape& y, bool has_bias,
                      const Conv2dOptions& options, MemoryFormat format, DType dtype) {
  const bool nhwc = format == MemoryFormat::ChannelsLast;
  const memory::desc x_md = nhwc ? ctx::format_desc(x, format, dtype) : ctx::any_desc(x, dtype);
  const memory::desc w_md = ctx::any_desc(w, dtype);
  const memory::desc y_md = nhwc ? ctx::format_desc(y, format, dtype) : ctx::any_desc(y, dtype);
  const memory::desc b_md = has_bias ? ctx::plain_desc({w[0]}) : memory::desc();
  const ctx::ConvGeometry geometry{.strides = {options.stride, options.stride},
                                   .padding = {options.padding, options.padding}};
  const auto& attr = ctx::attributes();
  const auto forward_pd = ctx::conv_forward_pd(x_md, w_md, b_md, y_md, geometry, attr);
  const auto backward_data_pd =
      ctx::conv_backward_data_pd(x_md, w_md, y_md, geometry, attr, forward_pd);
  const auto backward_weights_pd =
      ctx::conv_backward_weights_pd(x_md, w_md, b_md, y_md, geometry, attr, forward_pd);
  return {forward_pd,          dnnl::convolution_forward(forward_pd),
          backward_data_pd,    dnnl::convolution_backward_data(backward_data_pd),
          backward_weights_pd, dnnl::convolution_backward_weights(backward_weights_pd)};
}

std::shared_ptr<const ConvPrimitives> primitives_for(const Tensor& x, const Shape& w,
                                                     const Shape& y, bool has_bias,
                                                     const Conv2dOptions& options) {
  static ctx::PrimitiveCache<ConvPrimitives> cache;
  const MemoryFormat format = x.memory_format();
  const std::string key = shape_str(x.shape()) + shape_str(w) + (has_bias ? "b" : "") + "s" +
                          std::to_string(options.stride) + "p" + std::to_string(options.padding) +
                          memory_format_name(format) + dtype_name(x.dtype());
  return cache.get(key,
                   [&] { return create(x.shape(), w, y, has_bias, options, format, x.dtype()); });
}

// bfloat16 where oneDNN has no bfloat16 convolution (an AVX2 CPU: only with --allow-slow-bf16,
// apps/common/training_setup.h): the float32 primitives on widened copies, each result rounded
// once, as the bfloat16 primitives compute it.
bool through_float32(const Tensor& t) {
  return t.dtype() == DType::BFloat16 && !cpu_has_bf16_primitives();
}

}  // namespace

void CpuBackend::conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias,
                                const Conv2dOptions& options, Tensor& y) {
  if (through_float32(x)) {
    Tensor y_float = float_like(y);
    conv2d_forward(widened(x), widened(w), bias, options, y_float);
    return narrow_into(y_float, y);
  }
  const auto p = primitives_for(x, w.shape(), y.shape(), bias.defined(), options);
  const auto& pd = p->forward_pd;
  Tensor x_holder, w_holder, y_holder;  // blocked copies (Note [oneDNN layouts])
  const memory y_memory = ctx::output_in_layout(y, pd.dst_desc(), y_holder);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, ctx::as_layout(x, pd.src_desc(), x_holder)},
      {DNNL_ARG_WEIGHTS, ctx::as_layout(w, pd.weights_desc(), w_holder)},
      {DNNL_ARG_DST, y_memory}};
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, ctx::wrap(bias));
  ctx::execute(p->forward, pd.scratchpad_desc(), std::move(args));
  ctx::copy_to_tensor(y_memory, y);
}

void CpuBackend::conv2d_backward_input(const Tensor& grad_y, const Tensor& w,
                                       const Conv2dOptions& options, Tensor& grad_x) {
  if (through_float32(grad_y)) {
    Tensor grad_x_float = float_like(grad_x);
    conv2d_backward_input(widened(grad_y), widened(w), options, grad_x_float);
    return narrow_into(grad_x_float, grad_x);
  }
  const auto p = primitives_for(grad_x, w.shape(), grad_y.shape(), false, options);
  const auto& pd = p->backward_data_pd;
  Tensor grad_y_holder, w_holder, grad_x_holder;  // blocked copies (Note [oneDNN layouts])
  const memory grad_x_memory = ctx::output_in_layout(grad_x, pd.diff_src_desc(), grad_x_holder);
  ctx::execute(p->backward_data, pd.scratchpad_desc(),
               {{DNNL_ARG_DIFF_DST, ctx::as_layout(grad_y, pd.diff_dst_desc(), grad_y_holder)},
                {DNNL_ARG_WEIGHTS, ctx::as_layout(w, pd.weights_desc(), w_holder)},
                {DNNL_ARG_DIFF_SRC, grad_x_memory}});
  ctx::copy_to_tensor(grad_x_memory, grad_x);
}

void CpuBackend::conv2d_backward_weight(const Tensor& grad_y, const Tensor& x,
                                        const Conv2dOptions& options, Tensor& grad_w,
                                        Tensor& grad_bias) {
  if (through_float32(x)) {
    Tensor grad_w_float = float_like(grad_w);
    conv2d_backward_weight(widened(grad_y), widened(x), options, grad_w_float, grad_bias);
    return narrow_into(grad_w_float, grad_w);
  }
  const bool has_bias = grad_bias.defined();
  const auto p = primitives_for(x, grad_w.shape(), grad_y.shape(), has_bias, options);
  const auto& pd = p->backward_weights_pd;
  Tensor x_holder, grad_y_holder, grad_w_holder;  // blocked copies (Note [oneDNN layouts])
  const memory grad_w_memory = ctx::output_in_layout(grad_w, pd.diff_weights_desc(), grad_w_holder);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, ctx::as_layout(x, pd.src_desc(), x_holder)},
      {DNNL_ARG_DIFF_DST, ctx::as_layout(grad_y, pd.diff_dst_desc(), grad_y_holder)},
      {DNNL_ARG_DIFF_WEIGHTS, grad_w_memory}};
  if (has_bias) args.emplace(DNNL_ARG_DIFF_BIAS, ctx::wrap(grad_bias));
  ctx::execute(p->backward_weights, pd.scratchpad_desc(), std::move(args));
  ctx::copy_to_tensor(grad_w_memory, grad_w);
}

}  // namespace tandem::cpu
