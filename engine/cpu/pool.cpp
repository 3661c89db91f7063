// Pooling: max pooling through oneDNN (its workspace remembers the argmax for
// backward); adaptive average pooling in plain C++ with PyTorch's bins.

#include <cmath>
#include <cstring>
#include <vector>

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

// x: (N, C, H, W), y: (N, C, P, Q), both in `format`.
MaxPoolPrimitives create(const Shape& x, const Shape& y, const Pool2dOptions& o,
                         MemoryFormat format) {
  const memory::desc x_md = ctx::format_desc(x, format);
  const memory::desc y_md = ctx::format_desc(y, format);
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

std::shared_ptr<const MaxPoolPrimitives> primitives_for(const Tensor& x, const Shape& y,
                                                        const Pool2dOptions& o) {
  static ctx::PrimitiveCache<MaxPoolPrimitives> cache;
  const MemoryFormat format = x.memory_format();
  const std::string key = shape_str(x.shape()) + memory_format_name(format) + "k" +
                          std::to_string(o.kernel_size) + "s" + std::to_string(o.stride) + "p" +
                          std::to_string(o.padding);
  return cache.get(key, [&] { return create(x.shape(), y, o, format); });
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
  const auto p = primitives_for(x, y.shape(), options);
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
  const auto p = primitives_for(x, y.shape(), options);
  ctx::execute(p->backward, p->backward_pd.scratchpad_desc(),
               {{DNNL_ARG_DIFF_DST, ctx::wrap(grad_y)},
                {DNNL_ARG_DIFF_SRC, ctx::wrap(grad_x)},
                {DNNL_ARG_WORKSPACE, ctx::wrap(p->forward_pd.workspace_desc(), workspace)}});
}

// Both layouts add a bin's values in double, row by row, so
// NCHW and channels-last give the same bits. NCHW walks one (n, c) plane at a time;
// channels-last one (n, bin) at a time with the channels innermost, where they are contiguous.

// x: (N, C, H, W) → y: (N, C, P, Q), both in one format.
void CpuBackend::adaptive_avg_pool2d_forward(const Tensor& x, Tensor& y) {
  const int64_t channels = x.size(1), h = x.size(2), w = x.size(3), ph = y.size(2), pw = y.size(3);
  const float* in = x.data<float>();
  float* out = y.data<float>();
  if (x.memory_format() == MemoryFormat::ChannelsLast) {
    parallel_for(x.size(0) * ph * pw, 4, [&](int64_t begin, int64_t end) {
      std::vector<double> total(static_cast<size_t>(channels));
      for (int64_t cell = begin; cell < end; ++cell) {
        const int64_t n = cell / (ph * pw), i = cell / pw % ph, j = cell % pw;
        const int64_t r0 = bin_start(i, h, ph), r1 = bin_end(i, h, ph);
        const int64_t c0 = bin_start(j, w, pw), c1 = bin_end(j, w, pw);
        std::fill(total.begin(), total.end(), 0.0);
        for (int64_t r = r0; r < r1; ++r) {
          for (int64_t c = c0; c < c1; ++c) {
            const float* src = in + ((n * h + r) * w + c) * channels;
            for (int64_t k = 0; k < channels; ++k) total[k] += src[k];
          }
        }
        const double count = double((r1 - r0) * (c1 - c0));
        float* dst = out + cell * channels;
        for (int64_t k = 0; k < channels; ++k) dst[k] = static_cast<float>(total[k] / count);
      }
    });
    return;
  }
  parallel_for(x.size(0) * channels, 16, [&](int64_t begin, int64_t end) {
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

// grad_y: (N, C, P, Q) → grad_x: (N, C, H, W), both in one format; bins may overlap, so
// accumulate.
void CpuBackend::adaptive_avg_pool2d_backward(const Tensor& grad_y, Tensor& grad_x) {
  const int64_t channels = grad_x.size(1), h = grad_x.size(2), w = grad_x.size(3);
  const int64_t ph = grad_y.size(2), pw = grad_y.size(3);
  const float* g = grad_y.data<float>();
  float* gx = grad_x.data<float>();
  if (grad_x.memory_format() == MemoryFormat::ChannelsLast) {
    parallel_for(grad_x.size(0), 1, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        float* image = gx + n * h * w * channels;
        std::memset(image, 0, static_cast<size_t>(h * w * channels) * sizeof(float));
        for (int64_t i = 0; i < ph; ++i) {
          const int64_t r0 = bin_start(i, h, ph), r1 = bin_end(i, h, ph);
          for (int64_t j = 0; j < pw; ++j) {
            const int64_t c0 = bin_start(j, w, pw), c1 = bin_end(j, w, pw);
            const float count = static_cast<float>((r1 - r0) * (c1 - c0));
            const float* grad = g + ((n * ph + i) * pw + j) * channels;
            for (int64_t r = r0; r < r1; ++r) {
              for (int64_t c = c0; c < c1; ++c) {
                float* dst = image + (r * w + c) * channels;
                for (int64_t k = 0; k < channels; ++k) dst[k] += grad[k] / count;
              }
            }
          }
        }
      }
    });
    return;
  }
  parallel_for(grad_x.size(0) * channels, 16, [&](int64_t begin, int64_t end) {
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
