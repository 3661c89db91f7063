#pragma once
/// The primitive descriptors Tandem builds, in one place for both oneDNN APIs it compiles
/// against (Note [oneDNN 2 and 3]).
///
/// Note [oneDNN 2 and 3]: Tandem builds against oneDNN 3.2 from PyPI by default and Debian's
/// libdnnl-dev 2.6 with -DTANDEM_ONEDNN=2 (cmake/TandemDependencies.cmake; the measured choice is
/// in docs/benchmarks.md). The two APIs differ where a primitive descriptor is made: 2.6 builds
/// an op descriptor first and takes the engine last, 3.x takes the engine first and no op
/// descriptor; and 3.x dropped output scales for per-argument ones. Everything else Tandem calls
/// (memories, descriptors, execute, the scratchpad, the CPU ISA queries) is the same in both, so
/// the #if lives here only and the kernels read the same either way.

#include <oneapi/dnnl/dnnl.hpp>

namespace tandem::cpu::dnnl_context {

/// A 2-d convolution's strides and (symmetric) padding.
struct ConvGeometry {
  dnnl::memory::dims strides;
  dnnl::memory::dims padding;
};

/// x: (N, C, H, W), w: (K, C, R, S), b: (K) or a zero descriptor (no bias), y: (N, K, P, Q).
dnnl::convolution_forward::primitive_desc conv_forward_pd(
    const dnnl::memory::desc& x, const dnnl::memory::desc& w, const dnnl::memory::desc& b,
    const dnnl::memory::desc& y, const ConvGeometry& geometry, const dnnl::primitive_attr& attr);
dnnl::convolution_backward_data::primitive_desc conv_backward_data_pd(
    const dnnl::memory::desc& x, const dnnl::memory::desc& w, const dnnl::memory::desc& y,
    const ConvGeometry& geometry, const dnnl::primitive_attr& attr,
    const dnnl::convolution_forward::primitive_desc& hint);
dnnl::convolution_backward_weights::primitive_desc conv_backward_weights_pd(
    const dnnl::memory::desc& x, const dnnl::memory::desc& w, const dnnl::memory::desc& b,
    const dnnl::memory::desc& y, const ConvGeometry& geometry, const dnnl::primitive_attr& attr,
    const dnnl::convolution_forward::primitive_desc& hint);

/// c = a b (a: (M, K), b: (K, N), c: (M, N)).
dnnl::matmul::primitive_desc matmul_pd(const dnnl::memory::desc& a, const dnnl::memory::desc& b,
                                       const dnnl::memory::desc& c,
                                       const dnnl::primitive_attr& attr);
/// Makes a matmul built with `attr` compute c = alpha a b + beta c, its scales fused into the
/// kernel: 2.6's output scale, or in 3.x a linear post-op (it has no output scale, and its
/// per-argument scales would be one more runtime argument on every call).
void set_gemm_scales(dnnl::primitive_attr& attr, float alpha, float beta);

}  // namespace tandem::cpu::dnnl_context
