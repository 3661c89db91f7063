// Pooling: max pooling through oneDNN (its workspace remembers the argmax for
// backward); adaptive average pooling in plain C++ with PyTorch's bins.

#include <cmath>
#include <cstring>

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/dnnl_context.h"
#include "engine/cpu/parallel.h"
#include "engine/ops/factory.h"

namespace tandem::cpu {
namespace {

namespace ctx = dnnl_context;
using dnnl::memory;

struct MaxPoolPrimitives {
  dnnl::pooling_forward::primitive_desc forward_pd;
  dnnl::pooling_forward forward;
  dnnl::pooling_backward::primitive_desc backward_pd;
  dnnl::pooling_backward backward;
};

// x: (N, C, H, W), y: (N, C, P, Q)
MaxPoolPrimitives create(const Shape& x, const Shape& y, const Pool2dOptions& o) {
  const memory::desc x_md = ctx::plain_desc(x);
  const memory::desc y_md = ctx::plain_desc(y);
  const memory::dims strides = {o.stride, o.stride};
  const memory::dims kernel = {o.kernel_size, o.kernel_size};
  const memory::dims padding = {o.padding, o.padding};
  // Right padding that makes oneDNN's output size equal to PyTorch's floor formula.
  const memory::dims padding_r = {(y[2] - 1) * o.stride + o.kernel_size - x[2] - o.padding,
                                  (y[3] - 1) * o.stride + o.kernel_size - x[3] - o.padding};
  auto& engine = ctx::engine();
  const auto& attr = ctx::attributes();
  const auto max = dnnl::algorithm::pooling_max;
  dnnl::pooling_forward::primitive_desc forward_pd(
      dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training, max, x_md, y_md, strides,
                                  kernel, padding, padding_r),
      attr, engine);
  dnnl::pooling_backward::primitive_desc backward_pd(
      dnnl::pooling_backward::desc(max, x_md, y_md, strides, kernel, padding, padding_r), attr,
      engine, forward_pd);
  return {forward_pd, dnnl::pooling_forward(forward_pd), backward_pd,
          dnnl::pooling_backward(backward_pd)};
}

std::shared_ptr<const MaxPoolPrimitives> primitives_for(const Shape& x, const Shape& y,
                                                        const Pool2dOptions& o) {
  static ctx::PrimitiveCache<MaxPoolPrimitives> cache;
  const std::string key = shape_str(x) + "k" + std::to_string(o.kernel_size) + "s" +
                          std::to_string(o.stride) + "p" + std::to_string(o.padding);
  return cache.get(key, [&] { return create(x, y, o); });
}

// PyTorch's adaptive bins: [floor(i * in / out), ceil((i + 1) * in / out)).
int64_t bin_start(int64_t i, int64_t in, int64_t out) {
  return (i * in) / out;
}
int64_t bin_end(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

}  // namespace

void CpuBackend::max_pool2d_forward(const Tensor& x, const Pool2dOptions& options, Tensor& y,
                                    Tensor& workspace) {
  const auto p = primitives_for(x.shape(), y.shape(), options);
  const memory::desc ws_md = p->forward_pd.workspace_desc();
  workspace = empty({static_cast<int64_t>(ws_md.get_size())},
                    {.dtype = DType::UInt8, .device = x.device()});
  ctx::execute(p->forward, p->forward_pd.scratchpad_desc(),
               {{DNNL_ARG_SRC, ctx::wrap(x)},
                {DNNL_ARG_DST, ctx::wrap(y)},
                {DNNL_ARG_WORKSPACE, ctx::wrap(ws_md, workspace)}});
}

void CpuBackend::max_pool2d_backward(const Tensor& grad_y, const Tensor& x, const Tensor& y,
                                     const Tensor& workspace, const Pool2dOptions& options,
                                     Tensor& grad_x) {
  const auto p = primitives_for(x.shape(), y.shape(), options);
  ctx::execute(p->backward, p->backward_pd.scratchpad_desc(),
               {{DNNL_ARG_DIFF_DST, ctx::wrap(grad_y)},
                {DNNL_ARG_DIFF_SRC, ctx::wrap(grad_x)},
                {DNNL_ARG_WORKSPACE, ctx::wrap(p->forward_pd.workspace_desc(), workspace)}});
}

// x: (N, C, H, W) → y: (N, C, P, Q)
void CpuBackend::adaptive_avg_pool2d_forward(const Tensor& x, Tensor& y) {
  const int64_t h = x.size(2), w = x.size(3), ph = y.size(2), pw = y.size(3);
  const float* in = x.data<float>();
  float* out = y.data<float>();
  parallel_for(x.size(0) * x.size(1), 16, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const float* src = in + plane * h * w;
      for (int64_t i = 0; i < ph; ++i) {
        const int64_t r0 = bin_start(i, h, ph), r1 = bin_end(i, h, ph);
        for (int64_t j = 0; j < pw; ++j) {
          const int64_t c0 = bin_start(j, w, pw), c1 = bin_end(j, w, pw);
          double total = 0.0;
          for (int64_t r = r0; r < r1; ++r) {
            for (int64_t c = c0; c < c1; ++c) total += src[r * w + c];
          }
          out[(plane * ph + i) * pw + j] =
              static_cast<float>(total / double((r1 - r0) * (c1 - c0)));
        }
      }
    }
  });
}

// grad_y: (N, C, P, Q) → grad_x: (N, C, H, W); bins may overlap, so accumulate.
void CpuBackend::adaptive_avg_pool2d_backward(const Tensor& grad_y, Tensor& grad_x) {
  const int64_t h = grad_x.size(2), w = grad_x.size(3), ph = grad_y.size(2), pw = grad_y.size(3);
  const float* g = grad_y.data<float>();
  float* gx = grad_x.data<float>();
  parallel_for(grad_x.size(0) * grad_x.size(1), 16, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      float* dst = gx + plane * h * w;
      std::memset(dst, 0, static_cast<size_t>(h * w) * sizeof(float));
      for (int64_t i = 0; i < ph; ++i) {
        const int64_t r0 = bin_start(i, h, ph), r1 = bin_end(i, h, ph);
        for (int64_t j = 0; j < pw; ++j) {
          const int64_t c0 = bin_start(j, w, pw), c1 = bin_end(j, w, pw);
          const float share =
              g[(plane * ph + i) * pw + j] / static_cast<float>((r1 - r0) * (c1 - c0));
          for (int64_t r = r0; r < r1; ++r) {
            for (int64_t c = c0; c < c1; ++c) dst[r * w + c] += share;
          }
        }
      }
    }
  });
}

}  // namespace tandem::cpu
