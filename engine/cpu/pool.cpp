// Pooling: max pooling that remembers each window's argmax, and adaptive average pooling with
// PyTorch's bins, in plain C++ for NCHW and channels-last. Both take float32 or bfloat16 (Note
// [bfloat16 activations]).
//
// Max pooling is Tandem's own rather than oneDNN's: oneDNN (2.6) drops a NaN from its window,
// where PyTorch (and Tandem's CUDA kernel) return it (Note [NaN through ReLU and max pooling] in
// elementwise.cpp). Like the CUDA kernel it keeps the argmax as an int32 offset in the (h, w)
// plane, the first maximum of its window in row-major order, or its last NaN.

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "engine/backend/adaptive_bins.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/float_types.h"
#include "engine/cpu/parallel.h"
#include "engine/ops/factory.h"

namespace tandem::cpu {
namespace {

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

// x: (N, C, H, W) → (N, C, P, Q) with one kernel, stride and padding on both axes.
struct MaxPoolGeometry {
  int64_t n, c, h, w, p, q, kernel, stride, padding;

  MaxPoolGeometry(const Tensor& x, const Tensor& y, const Pool2dOptions& o)
      : n(x.size(0)),
        c(x.size(1)),
        h(x.size(2)),
        w(x.size(3)),
        p(y.size(2)),
        q(y.size(3)),
        kernel(o.kernel_size),
        stride(o.stride),
        padding(o.padding) {}
  // The rows [begin, end) of input that window row i covers (never empty: padding <= kernel / 2).
  int64_t row_begin(int64_t i) const { return std::max<int64_t>(i * stride - padding, 0); }
  int64_t row_end(int64_t i) const { return std::min(i * stride - padding + kernel, h); }
  int64_t col_begin(int64_t j) const { return std::max<int64_t>(j * stride - padding, 0); }
  int64_t col_end(int64_t j) const { return std::min(j * stride - padding + kernel, w); }
};

// The window's element `v` replaces the best so far: a larger value, or any NaN (Note [NaN
// through ReLU and max pooling]).
inline bool takes_over(float v, float best) {
  return v > best || v != v;
}

int32_t* argmax_of(Tensor& workspace) {
  return static_cast<int32_t*>(workspace.data_ptr());
}

// NCHW: one output row of one (n, c) plane at a time, its windows side by side. Each window
// starts at its first element with best = -inf (so that element wins unless a later one
// takes over, exactly as if it had started the window), then takes the window's elements in
// row-major order, every window's k-th column at once: a loop over the output columns that
// vectorises (a strided load for stride 2).
template <typename T>
void max_pool_forward_planes(const MaxPoolGeometry& g, const T* x, T* y, int32_t* argmax) {
  parallel_for(g.n * g.c, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> best(static_cast<size_t>(g.q));
    for (int64_t plane = begin; plane < end; ++plane) {
      const T* in = x + plane * g.h * g.w;
      for (int64_t i = 0; i < g.p; ++i) {
        const int64_t o = (plane * g.p + i) * g.q;
        int32_t* at = argmax + o;
        for (int64_t j = 0; j < g.q; ++j) {
          best[j] = -INFINITY;
          at[j] = static_cast<int32_t>(g.row_begin(i) * g.w + g.col_begin(j));
        }
        for (int64_t r = g.row_begin(i); r < g.row_end(i); ++r) {
          for (int64_t t = 0; t < g.kernel; ++t) {
            // The windows whose column t is inside the input: 0 <= j * stride - padding + t < w.
            const int64_t first = std::max<int64_t>(0, (g.padding - t + g.stride - 1) / g.stride);
            const int64_t reach = g.w - 1 + g.padding - t;  // j * stride <= reach
            const int64_t last = reach < 0 ? 0 : std::min(g.q, reach / g.stride + 1);
            const T* row = in + r * g.w - g.padding + t;
            const auto offset = static_cast<int32_t>(r * g.w - g.padding + t);
            for (int64_t j = first; j < last; ++j) {
              const float v = widen(row[j * g.stride]);
              const bool take = takes_over(v, best[j]);
              best[j] = take ? v : best[j];
              at[j] = take ? offset + static_cast<int32_t>(j * g.stride) : at[j];
            }
          }
        }
        for (int64_t j = 0; j < g.q; ++j) y[o + j] = narrow<T>(best[j]);  // exact: an input
      }
    }
  });
}

// Channels-last: one (n, i, j) window at a time, the channels innermost, where they are
// contiguous (the compare-and-select loop vectorises).
template <typename T>
void max_pool_forward_channels_last(const MaxPoolGeometry& g, const T* x, T* y, int32_t* argmax) {
  parallel_for(g.n * g.p * g.q, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> best(static_cast<size_t>(g.c));
    for (int64_t cell = begin; cell < end; ++cell) {
      const int64_t n = cell / (g.p * g.q), i = cell / g.q % g.p, j = cell % g.q;
      int32_t* at = argmax + cell * g.c;
      bool first = true;
      for (int64_t r = g.row_begin(i); r < g.row_end(i); ++r) {
        for (int64_t s = g.col_begin(j); s < g.col_end(j); ++s) {
          const T* src = x + ((n * g.h + r) * g.w + s) * g.c;
          const auto offset = static_cast<int32_t>(r * g.w + s);
          for (int64_t k = 0; k < g.c; ++k) {
            const float v = widen(src[k]);
            const bool take = first || takes_over(v, best[k]);
            best[k] = take ? v : best[k];
            at[k] = take ? offset : at[k];
          }
          first = false;
        }
      }
      T* out = y + cell * g.c;
      for (int64_t k = 0; k < g.c; ++k) out[k] = narrow<T>(best[k]);
    }
  });
}

// grad_x = 0, plus each window's gradient at its argmax, added in output order (overlapping
// windows: the CUDA kernel adds in the same order, so both give the same bits), in float32.
template <typename T>
void max_pool_backward_typed(const MaxPoolGeometry& g, const T* grad_y, const int32_t* argmax,
                             bool channels_last, T* grad_x) {
  const int64_t outputs = g.p * g.q, inputs = g.h * g.w;
  if (channels_last) {
    parallel_for(g.n, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> scratch;
      for (int64_t n = begin; n < end; ++n) {
        T* image_out = grad_x + n * inputs * g.c;
        float* image = accumulator(image_out, inputs * g.c, scratch);
        for (int64_t o = n * outputs * g.c; o < (n + 1) * outputs * g.c; o += g.c) {
          for (int64_t k = 0; k < g.c; ++k) image[argmax[o + k] * g.c + k] += widen(grad_y[o + k]);
        }
        store_accumulated(image, inputs * g.c, image_out);
      }
    });
    return;
  }
  parallel_for(g.n * g.c, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch;
    for (int64_t plane = begin; plane < end; ++plane) {
      T* plane_out = grad_x + plane * inputs;
      float* dst = accumulator(plane_out, inputs, scratch);
      for (int64_t o = plane * outputs; o < (plane + 1) * outputs; ++o) {
        dst[argmax[o]] += widen(grad_y[o]);
      }
      store_accumulated(dst, inputs, plane_out);
    }
  });
}

}  // namespace

void CpuBackend::max_pool2d_forward(const Tensor& x, const Pool2dOptions& options, Tensor& y,
                                    Tensor& workspace) {
  check_kernel_dtypes("max_pool2d", x.dtype(), {&y});
  workspace = empty({y.numel() * static_cast<int64_t>(sizeof(int32_t))},
                    {.dtype = DType::UInt8, .device = x.device()});
  if (y.numel() == 0) return;
  const MaxPoolGeometry g(x, y, options);
  dispatch_float_types(x.dtype(), "max_pool2d", [&](auto type) {
    using T = decltype(type);
    const T* in = static_cast<const T*>(x.data_ptr());
    T* out = static_cast<T*>(y.data_ptr());
    if (x.memory_format() == MemoryFormat::ChannelsLast) {
      max_pool_forward_channels_last(g, in, out, argmax_of(workspace));
    } else {
      max_pool_forward_planes(g, in, out, argmax_of(workspace));
    }
  });
}

void CpuBackend::max_pool2d_backward(const Tensor& grad_y, const Tensor& x, const Tensor& y,
                                     const Tensor& workspace, const Pool2dOptions& options,
                                     Tensor& grad_x) {
  check_kernel_dtypes("max_pool2d_backward", x.dtype(), {&grad_y, &y, &grad_x});
  TANDEM_CHECK(workspace.defined() && workspace.device() == grad_x.device() &&
                   workspace.numel() == grad_y.numel() * static_cast<int64_t>(sizeof(int32_t)),
               "[max_pool2d_backward] the workspace does not come from this backend's forward");
  if (grad_x.numel() == 0) return;
  const MaxPoolGeometry g(x, y, options);
  const auto* argmax = static_cast<const int32_t*>(workspace.data_ptr());
  dispatch_float_types(x.dtype(), "max_pool2d_backward", [&](auto type) {
    using T = decltype(type);
    max_pool_backward_typed(g, static_cast<const T*>(grad_y.data_ptr()), argmax,
                            grad_x.memory_format() == MemoryFormat::ChannelsLast,
                            static_cast<T*>(grad_x.data_ptr()));
  });
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
