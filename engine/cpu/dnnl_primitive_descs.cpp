#include "engine/cpu/dnnl_primitive_descs.h"

#include "engine/cpu/dnnl_context.h"

// Note [oneDNN 2 and 3] in the header: each function is the same call in the two APIs' shapes.
#if DNNL_VERSION_MAJOR >= 3
#define TANDEM_ONEDNN_3 1
#else
#define TANDEM_ONEDNN_3 0
#endif

namespace tandem::cpu::dnnl_context {

using dnnl::memory;

namespace {
constexpr auto kDirect = dnnl::algorithm::convolution_direct;
}  // namespace

dnnl::convolution_forward::primitive_desc conv_forward_pd(
    const memory::desc& x, const memory::desc& w, const memory::desc& b, const memory::desc& y,
    const ConvGeometry& g, const dnnl::primitive_attr& attr) {
  const auto kind = dnnl::prop_kind::forward_training;
#if TANDEM_ONEDNN_3
  return {engine(), kind, kDirect, x, w, b, y, g.strides, g.padding, g.padding, attr};
#else
  return {{kind, kDirect, x, w, b, y, g.strides, g.padding, g.padding}, attr, engine()};
#endif
}

dnnl::convolution_backward_data::primitive_desc conv_backward_data_pd(
    const memory::desc& x, const memory::desc& w, const memory::desc& y, const ConvGeometry& g,
    const dnnl::primitive_attr& attr, const dnnl::convolution_forward::primitive_desc& hint) {
#if TANDEM_ONEDNN_3
  return {engine(), kDirect, x, w, y, g.strides, g.padding, g.padding, hint, attr};
#else
  return {{kDirect, x, w, y, g.strides, g.padding, g.padding}, attr, engine(), hint};
#endif
}

dnnl::convolution_backward_weights::primitive_desc conv_backward_weights_pd(
    const memory::desc& x, const memory::desc& w, const memory::desc& b, const memory::desc& y,
    const ConvGeometry& g, const dnnl::primitive_attr& attr,
    const dnnl::convolution_forward::primitive_desc& hint) {
#if TANDEM_ONEDNN_3
  return {engine(), kDirect, x, w, b, y, g.strides, g.padding, g.padding, hint, attr};
#else
  return {{kDirect, x, w, b, y, g.strides, g.padding, g.padding}, attr, engine(), hint};
#endif
}

dnnl::matmul::primitive_desc matmul_pd(const memory::desc& a, const memory::desc& b,
                                       const memory::desc& c, const dnnl::primitive_attr& attr) {
#if TANDEM_ONEDNN_3
  return {engine(), a, b, c, attr};
#else
  return {{a, b, c}, attr, engine()};
#endif
}

void set_gemm_scales(dnnl::primitive_attr& attr, float alpha, float beta) {
  dnnl::post_ops ops;
#if TANDEM_ONEDNN_3
  // Post-ops apply in order to the product: alpha first, then beta times c's old value added.
  if (alpha != 1.0f) ops.append_eltwise(dnnl::algorithm::eltwise_linear, alpha, 0.0f);
#else
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
#endif
  if (beta != 0.0f) ops.append_sum(beta);
  attr.set_post_ops(ops);
}

}  // namespace tandem::cpu::dnnl_context
