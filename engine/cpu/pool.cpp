// Pooling: max pooling through oneDNN (its workspace remembers the argmax for
// backward); adaptive average pooling in plain C++ with PyTorch's bins. Both take float32 or
// bfloat16 (Note [bfloat16 activations]).

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "engine/adaptive_bins.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/dnnl_context.h"
#include "engine/cpu/float_types.h"
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

}  // namespace

void CpuBackend::max_pool2d_forward(const Tensor& x, const Pool2dOptions& options, Tensor& y,
                                    Tensor& workspace) {
  check_kernel_dtypes("max_pool2d", x.dtype(), {&y});
  if (x.dtype() == DType::BFloat16) {  // through float32 (widened()): a maximum is exact
    Tensor y_float = widened(y);
    max_pool2d_forward(widened(x), options, y_float, workspace);
    return narrow_into(y_float, y);
  }
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
  check_kernel_dtypes("max_pool2d_backward", x.dtype(), {&grad_y, &y, &grad_x});
  if (x.dtype() == DType::BFloat16) {  // overlapping windows add up in float32, rounded once
    Tensor grad_x_float = float_like(grad_x);
    // oneDNN's backward reads x and y for their shapes and layout alone.
    max_pool2d_backward(widened(grad_y), float_like(x), float_like(y), workspace, options,
                        grad_x_float);
    return narrow_into(grad_x_float, grad_x);
  }
  const auto p = primitives_for(x, y.shape(), options);
  ctx::execute(p->backward, p->backward_pd.scratchpad_desc(),
               {{DNNL_ARG_DIFF_DST, ctx::wrap(grad_y)},
                {DNNL_ARG_DIFF_SRC, ctx::wrap(grad_x)},
                {DNNL_ARG_WORKSPACE, ctx::wrap(p->forward_pd.workspace_desc(), workspace)}});
}

namespace {

// Both layouts add a bin's values in double, row by row, so NCHW and channels-last give the same
// bits. NCHW walks one (n, c) plane at a time; channels-last one (n, bin) at a time with the
// channels innermost, where they are contiguous.

// x: (N, C, H, W) → y: (N, C, P, Q), both in one format.
template <typename T>
void adaptive_avg_pool2d_forward_typed(const Tensor& x, Tensor& y) {
  const int64_t channels = x.size(1), h = x.size(2), w = x.size(3), ph = y.size(2), pw = y.size(3);
  const T* in = static_cast<const T*>(x.data_ptr());
  T* out = static_cast<T*>(y.data_ptr());
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
            const T* src = in + ((n * h + r) * w + c) * channels;
            for (int64_t k = 0; k < channels; ++k) total[k] += widen(src[k]);
          }
        }
        const double count = double((r1 - r0) * (c1 - c0));
        T* dst = out + cell * channels;
        for (int64_t k = 0; k < channels; ++k) {
          dst[k] = narrow<T>(static_cast<float>(total[k] / count));
        }
      }
    });
    return;
  }
  parallel_for(x.size(0) * channels, 16, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const T* src = in + plane * h * w;
      for (int64_t i = 0; i < ph; ++i) {
        const int64_t r0 = bin_start(i, h, ph), r1 = bin_end(i, h, ph);
        for (int64_t j = 0; j < pw; ++j) {
          const int64_t c0 = bin_start(j, w, pw), c1 = bin_end(j, w, pw);
          double total = 0.0;
          for (int64_t r = r0; r < r1; ++r) {
            for (int64_t c = c0; c < c1; ++c) total += widen(src[r * w + c]);
          }
          out[(plane * ph + i) * pw + j] =
              narrow<T>(static_cast<float>(total / double((r1 - r0) * (c1 - c0))));
        }
      }
    }
  });
}

// grad_x = zeros, then each bin's share added to its cells, in float32: in `scratch` (of `size`
// floats, reused by the caller) when T is not float, then rounded once into grad_x. Returns where
// to accumulate.
template <typename T>
float* accumulator(T* grad_x, int64_t size, std::vector<float>& scratch) {
  float* acc;
  if constexpr (std::is_same_v<T, float>) {
    acc = grad_x;
  } else {
    scratch.resize(static_cast<size_t>(size));
    acc = scratch.data();
  }
  std::memset(acc, 0, static_cast<size_t>(size) * sizeof(float));
  return acc;
}

template <typename T>
void store_accumulated(const float* acc, int64_t size, T* grad_x) {
  if constexpr (!std::is_same_v<T, float>) {
    for (int64_t i = 0; i < size; ++i) grad_x[i] = narrow<T>(acc[i]);
  }
}

// grad_y: (N, C, P, Q) → grad_x: (N, C, H, W), both in one format; bins may overlap, so
// accumulate.
template <typename T>
void adaptive_avg_pool2d_backward_typed(const Tensor& grad_y, Tensor& grad_x) {
  const int64_t channels = grad_x.size(1), h = grad_x.size(2), w = grad_x.size(3);
  const int64_t ph = grad_y.size(2), pw = grad_y.size(3);
  const T* g = static_cast<const T*>(grad_y.data_ptr());
  T* gx = static_cast<T*>(grad_x.data_ptr());
  if (grad_x.memory_format() == MemoryFormat::ChannelsLast) {
    parallel_for(grad_x.size(0), 1, [&](int64_t begin, int64_t end) {
      std::vector<float> scratch;
      for (int64_t n = begin; n < end; ++n) {
        T* image_out = gx + n * h * w * channels;
        float* image = accumulator(image_out, h * w * channels, scratch);
        for (int64_t i = 0; i < ph; ++i) {
          const int64_t r0 = bin_start(i, h, ph), r1 = bin_end(i, h, ph);
          for (int64_t j = 0; j < pw; ++j) {
            const int64_t c0 = bin_start(j, w, pw), c1 = bin_end(j, w, pw);
            const float count = static_cast<float>((r1 - r0) * (c1 - c0));
            const T* grad = g + ((n * ph + i) * pw + j) * channels;
            for (int64_t r = r0; r < r1; ++r) {
              for (int64_t c = c0; c < c1; ++c) {
                float* dst = image + (r * w + c) * channels;
                for (int64_t k = 0; k < channels; ++k) dst[k] += widen(grad[k]) / count;
              }
            }
          }
        }
        store_accumulated(image, h * w * channels, image_out);
      }
    });
    return;
  }
  parallel_for(grad_x.size(0) * channels, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch;
    for (int64_t plane = begin; plane < end; ++plane) {
      T* plane_out = gx + plane * h * w;
      float* dst = accumulator(plane_out, h * w, scratch);
      for (int64_t i = 0; i < ph; ++i) {
        const int64_t r0 = bin_start(i, h, ph), r1 = bin_end(i, h, ph);
        for (int64_t j = 0; j < pw; ++j) {
          const int64_t c0 = bin_start(j, w, pw), c1 = bin_end(j, w, pw);
          const float share =
              widen(g[(plane * ph + i) * pw + j]) / static_cast<float>((r1 - r0) * (c1 - c0));
          for (int64_t r = r0; r < r1; ++r) {
            for (int64_t c = c0; c < c1; ++c) dst[r * w + c] += share;
          }
        }
      }
      store_accumulated(dst, h * w, plane_out);
    }
  });
}

}  // namespace

void CpuBackend::adaptive_avg_pool2d_forward(const Tensor& x, Tensor& y) {
  check_kernel_dtypes("adaptive_avg_pool2d", x.dtype(), {&y});
  dispatch_float_types(x.dtype(), "adaptive_avg_pool2d",
                       [&](auto type) { adaptive_avg_pool2d_forward_typed<decltype(type)>(x, y); });
}

void CpuBackend::adaptive_avg_pool2d_backward(const Tensor& grad_y, Tensor& grad_x) {
  check_kernel_dtypes("adaptive_avg_pool2d_backward", grad_y.dtype(), {&grad_x});
  dispatch_float_types(grad_y.dtype(), "adaptive_avg_pool2d_backward", [&](auto type) {
    adaptive_avg_pool2d_backward_typed<decltype(type)>(grad_y, grad_x);
  });
}

}  // namespace tandem::cpu
