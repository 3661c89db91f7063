// Note [Channels-last batch norm]: oneDNN 2.6's batch norm on nhwc was the slowest op of a
// channels-last ResNet-20 step on AVX-512 (bnorm_jit:avx512_core, ~24 ms a call at
// 128x16x32x32 where a pass over the data takes well under 1 ms; 2026-11-23, AMD EPYC Zen 4),
// and its NCHW path is slower still (ncsp_bnorm). PyTorch does not use oneDNN here either: its
// channels-last batch norm is a few passes over rows of C contiguous channels, as these are.
//
// Each pass is one OpenMP region over fixed blocks of rows, so the result does not depend on
// the thread count: a block sums its rows in float, vectorised across channels, and the
// blocks' partial sums are added in double in block order. The variance is the mean of the
// squared deviations, summed after shifting each block by one of its own values and merged
// with Chan et al.'s update, not E[x^2] - E[x]^2, which cancels badly when the mean is large:
// one pass over the data for both statistics. Per-element loops are compiled for AVX-512 (with
// and without BW/VL, x86-64-v4, whose 16-bit packing makes bfloat16 stores cheaper), AVX2 and the
// baseline, picked at load time (target_clones), since the build targets no particular CPU.
//
// Each loop is templated on the element type T of x, y and their gradients, float or BFloat16
// (Note [bfloat16 activations]): widen() on load, narrow<T>() on store (engine/cpu/float_types.h),
// the rest float32 as for float, so the statistics of bfloat16 data are those the float32 kernel
// computes on the same (widened) values. The conversions are inline and vectorise (a load
// where y > 0 would not: through_relu()). bfloat16 / float32 time of forward + backward, plain /
// fused ReLU, 2 threads, AMD EPYC Zen 4 (2026-11-26, a shared machine, minimum of 500 interleaved
// runs): (128,16,32,32) 0.72 / 0.68, half the bytes where the data outgrows the cache;
// (128,32,16,16) 1.11 / 1.15 and (128,64,8,8) 1.17 / 1.23, cache-resident, where the ~8 integer
// instructions of each exact rounding (Note [Half conversions]) cost more than the bytes saved.
// (The same change made float32 1.12-1.20x faster, restrict and the x86-64-v4 clone: bfloat16
// takes at most 7% more time than the float32 kernel before it did, on every shape.)
// AVX-512 BF16's one-instruction conversion would flush subnormals, which the Note rules out.
//
// A ResNet block's end, bn2 + shortcut + ReLU (batch_norm2d_add_relu), is the fused ReLU with the
// residual added in the same pass. Its backward is the fused ReLU's, whose sums' pass also stores
// the masked gradient (the residual's gradient, exact in T) and whose grad_x pass reads that alone
// instead of grad_y and y: 7 streams over the activation where relu_backward then batch norm's
// backward read and wrote 8, and two passes where they made three. Float32 gives the separate
// ops' values bit for bit: the same arithmetic in the same order.

#include "engine/cpu/batch_norm_channels_last.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/cpu/float_types.h"
#include "engine/cpu/parallel.h"

namespace tandem::cpu::channels_last {
namespace {

// Under ThreadSanitizer the clones' resolvers would run, instrumented, while the dynamic loader
// relocates the program, before TSan's runtime exists, and crash it: one baseline version then.
#if defined(__SANITIZE_THREAD__)
#define TANDEM_VECTOR_CLONES
#else
#define TANDEM_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "avx512f", "avx2", "default")))
#endif
// Clang multiversions no function templates: each loop below is a template body, inlined into
// one cloned overload per element type (TANDEM_ROW_LOOPS_FOR), which vectorises it for its ISA.
#define TANDEM_LOOP_BODY __attribute__((always_inline)) inline

constexpr int64_t kBlocks = 64;  // fixed, so that sums do not depend on the thread count

struct Rows {
  int64_t count;     // N * H * W
  int64_t channels;  // C
};

Rows rows_of(const Tensor& x) {
  return {x.size(0) * x.size(2) * x.size(3), x.size(1)};
}

int64_t block_begin(int64_t block, int64_t blocks, int64_t rows) {
  return rows * block / blocks;
}

// Over rows [begin, end): shift[c] = x[begin, c], sum[c] = sum of (x - shift), squares[c] = sum
// of (x - shift)^2. Shifting by a value of the data keeps the float sums small (Note
// [Channels-last batch norm]).
template <typename T>
TANDEM_LOOP_BODY void moment_rows_body(const T* x, int64_t begin, int64_t end, int64_t channels,
                                       float* __restrict shift, float* __restrict sum,
                                       float* __restrict squares) {
  const T* first = x + begin * channels;
  for (int64_t c = 0; c < channels; ++c) {
    shift[c] = widen(first[c]);
    sum[c] = squares[c] = 0.0f;
  }
  for (int64_t r = begin; r < end; ++r) {
    const T* row = x + r * channels;
    for (int64_t c = 0; c < channels; ++c) {
      const float d = widen(row[c]) - shift[c];
      sum[c] += d;
      squares[c] += d * d;
    }
  }
}

// y[r, c] = x[r, c] * scale[c] + shift[c], or its max with 0, or (residual given, with relu) the
// max of it plus residual[r, c] and 0: a residual block's end in the pass that normalises.
template <typename T>
TANDEM_LOOP_BODY void affine_rows_body(const T* x, const T* residual, const float* scale,
                                       const float* shift, int64_t begin, int64_t end,
                                       int64_t channels, bool relu, T* __restrict y) {
  for (int64_t r = begin; r < end; ++r) {
    const T* in = x + r * channels;
    T* out = y + r * channels;
    if (residual != nullptr) {
      const T* add = residual + r * channels;
      for (int64_t c = 0; c < channels; ++c) {
        out[c] = narrow<T>(std::max(widen(in[c]) * scale[c] + shift[c] + widen(add[c]), 0.0f));
      }
    } else if (relu) {
      for (int64_t c = 0; c < channels; ++c) {
        out[c] = narrow<T>(std::max(widen(in[c]) * scale[c] + shift[c], 0.0f));
      }
    } else {
      for (int64_t c = 0; c < channels; ++c) out[c] = narrow<T>(widen(in[c]) * scale[c] + shift[c]);
    }
  }
}

// The gradient reaching batch norm's output: grad_y, or zero where the fused ReLU's output y
// (null: no ReLU) is zero or less; a NaN output passes it, as ReLU's own backward does (Note [NaN
// through ReLU and max pooling] in elementwise.cpp).
// grad_y is loaded whatever y says: a load only where y > 0 vectorises as a masked load, which
// AVX2 and AVX-512F have for 32-bit elements but not for bfloat16's 16 (that loop ran scalar).
template <typename T>
inline float through_relu(const T* grad_y, const T* y, int64_t i) {
  const float g = widen(grad_y[i]);
  return y != nullptr && widen(y[i]) <= 0.0f ? 0.0f : g;  // a NaN output passes g
}

// grad_x[r, c] = g[r, c] * a[c] + x[r, c] * b[c] + d[c], g = grad_y through the ReLU
template <typename T>
TANDEM_LOOP_BODY void backward_rows_body(const T* grad_y, const T* y, const T* x, const float* a,
                                         const float* b, const float* d, int64_t begin, int64_t end,
                                         int64_t channels, T* __restrict grad_x) {
  for (int64_t r = begin; r < end; ++r) {
    const int64_t row = r * channels;
    const T* in = x + row;
    T* out = grad_x + row;
    if (y != nullptr) {
      for (int64_t c = 0; c < channels; ++c) {
        const float g = through_relu(grad_y, y, row + c);
        out[c] = narrow<T>(g * a[c] + widen(in[c]) * b[c] + d[c]);
      }
    } else {
      for (int64_t c = 0; c < channels; ++c) {
        out[c] = narrow<T>(widen(grad_y[row + c]) * a[c] + widen(in[c]) * b[c] + d[c]);
      }
    }
  }
}

// partial_g[c] = sum of g; partial_gx[c] = sum of g * (x - mean), over [begin, end); g = grad_y
// through the ReLU. masked, when not null, receives g: the residual's gradient of the fused batch
// norm + add + ReLU, which the grad_x pass then reads instead of grad_y and y (one load, not two).
template <typename T>
TANDEM_LOOP_BODY void grad_sums_rows_body(const T* grad_y, const T* y, const T* x,
                                          const float* mean, int64_t begin, int64_t end,
                                          int64_t channels, float* __restrict partial_g,
                                          float* __restrict partial_gx, T* __restrict masked) {
  for (int64_t c = 0; c < channels; ++c) partial_g[c] = partial_gx[c] = 0.0f;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t row = r * channels;
    const T* in = x + row;
    if (masked != nullptr) {
      for (int64_t c = 0; c < channels; ++c) {
        const float g = through_relu(grad_y, y, row + c);
        masked[row + c] = narrow<T>(g);  // exact: g is a value of T or 0
        partial_g[c] += g;
        partial_gx[c] += g * (widen(in[c]) - mean[c]);
      }
    } else {
      for (int64_t c = 0; c < channels; ++c) {
        const float g = through_relu(grad_y, y, row + c);
        partial_g[c] += g;
        partial_gx[c] += g * (widen(in[c]) - mean[c]);
      }
    }
  }
}

// NOLINTBEGIN(bugprone-macro-parentheses): T names a type, which parentheses would not parse
#define TANDEM_ROW_LOOPS_FOR(T)                                                                    \
  TANDEM_VECTOR_CLONES void moment_rows(const T* x, int64_t begin, int64_t end, int64_t channels,  \
                                        float* __restrict shift, float* __restrict sum,            \
                                        float* __restrict squares) {                               \
    moment_rows_body(x, begin, end, channels, shift, sum, squares);                                \
  }                                                                                                \
  TANDEM_VECTOR_CLONES void affine_rows(const T* x, const T* residual, const float* scale,         \
                                        const float* shift, int64_t begin, int64_t end,            \
                                        int64_t channels, bool relu, T* __restrict y) {            \
    affine_rows_body(x, residual, scale, shift, begin, end, channels, relu, y);                    \
  }                                                                                                \
  TANDEM_VECTOR_CLONES void backward_rows(const T* grad_y, const T* y, const T* x, const float* a, \
                                          const float* b, const float* d, int64_t begin,           \
                                          int64_t end, int64_t channels, T* __restrict grad_x) {   \
    backward_rows_body(grad_y, y, x, a, b, d, begin, end, channels, grad_x);                       \
  }                                                                                                \
  TANDEM_VECTOR_CLONES void grad_sums_rows(const T* grad_y, const T* y, const T* x,                \
                                           const float* mean, int64_t begin, int64_t end,          \
                                           int64_t channels, float* __restrict partial_g,          \
                                           float* __restrict partial_gx, T* __restrict masked) {   \
    grad_sums_rows_body(grad_y, y, x, mean, begin, end, channels, partial_g, partial_gx, masked);  \
  }
TANDEM_ROW_LOOPS_FOR(float)
TANDEM_ROW_LOOPS_FOR(BFloat16)
#undef TANDEM_ROW_LOOPS_FOR
// NOLINTEND(bugprone-macro-parentheses)

struct Moments {
  std::vector<double> mean;      // per channel
  std::vector<double> variance;  // biased
};

// Per-channel mean and biased variance over all rows in one pass: each block's shifted sums,
// then the blocks merged in double in block order (Chan et al.'s pairwise update).
template <typename T>
Moments channel_moments(const T* x, const Rows& rows) {
  const int64_t blocks = std::min(kBlocks, std::max<int64_t>(rows.count, 1));
  const size_t per_block = static_cast<size_t>(rows.channels);
  std::vector<float> shift(blocks * per_block), sum(shift.size()), squares(shift.size());
  parallel_for(blocks, 1, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      moment_rows(x, block_begin(b, blocks, rows.count), block_begin(b + 1, blocks, rows.count),
                  rows.channels, shift.data() + b * per_block, sum.data() + b * per_block,
                  squares.data() + b * per_block);
    }
  });
  Moments total{std::vector<double>(per_block, 0.0), std::vector<double>(per_block, 0.0)};
  std::vector<double> m2(per_block, 0.0);
  double count = 0.0;
  for (int64_t b = 0; b < blocks; ++b) {
    const double n = static_cast<double>(block_begin(b + 1, blocks, rows.count) -
                                         block_begin(b, blocks, rows.count));
    if (n == 0) continue;
    for (size_t c = 0; c < per_block; ++c) {
      const size_t i = b * per_block + c;
      const double block_mean = shift[i] + sum[i] / n;
      const double block_m2 = std::max(0.0, squares[i] - double(sum[i]) * sum[i] / n);
      const double delta = block_mean - total.mean[c];
      total.mean[c] += delta * n / (count + n);
      m2[c] += block_m2 + delta * delta * count * n / (count + n);
    }
    count += n;
  }
  for (size_t c = 0; c < per_block; ++c) total.variance[c] = m2[c] / std::max(count, 1.0);
  return total;
}

template <typename T>
void apply_affine(const Tensor& x, const Tensor& residual, const std::vector<float>& scale,
                  const std::vector<float>& shift, bool relu, Tensor& y) {
  const Rows rows = rows_of(x);
  const T* in = static_cast<const T*>(x.data_ptr());
  const T* add = residual.defined() ? residual.data<T>() : nullptr;
  T* out = static_cast<T*>(y.data_ptr());
  const int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(rows.channels, 1));
  parallel_for(rows.count, grain, [&](int64_t begin, int64_t end) {
    affine_rows(in, add, scale.data(), shift.data(), begin, end, rows.channels, relu, out);
  });
}

std::vector<float> host_values(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

template <typename T>
void forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                      bool relu, const Tensor& residual, Tensor& y, Tensor& save_mean,
                      Tensor& save_var) {
  const Rows rows = rows_of(x);
  const size_t channels = static_cast<size_t>(rows.channels);
  const Moments moments = channel_moments(x.data<T>(), rows);

  const float* g = gamma.data<float>();
  const float* b = beta.data<float>();
  float* out_mean = save_mean.data<float>();
  float* out_var = save_var.data<float>();
  std::vector<float> scale(channels), shift(channels);
  for (size_t c = 0; c < channels; ++c) {
    const double mean = moments.mean[c], var = moments.variance[c];
    const double invstd = 1.0 / std::sqrt(var + eps);
    out_mean[c] = static_cast<float>(mean);
    out_var[c] = static_cast<float>(var);
    scale[c] = static_cast<float>(g[c] * invstd);
    shift[c] = static_cast<float>(b[c] - mean * g[c] * invstd);
  }
  apply_affine<T>(x, residual, scale, shift, relu, y);
}

template <typename T>
void forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                       const Tensor& var, float eps, Tensor& y) {
  const size_t channels = static_cast<size_t>(x.size(1));
  const float* g = gamma.data<float>();
  const float* b = beta.data<float>();
  const float* m = mean.data<float>();
  const float* v = var.data<float>();
  std::vector<float> scale(channels), shift(channels);
  for (size_t c = 0; c < channels; ++c) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(v[c]) + eps);
    scale[c] = static_cast<float>(g[c] * invstd);
    shift[c] = static_cast<float>(b[c] - m[c] * g[c] * invstd);
  }
  apply_affine<T>(x, Tensor(), scale, shift, false, y);
}

// The per-channel factors of backward_rows: grad_x = g * a + x * b + d.
struct GradXFactors {
  std::vector<float> a, b, d;
};

// From the blocks' partial sums (blocks x C, block order): grad_gamma, grad_beta and the factors
// of grad_x. The partials are added in double in block order (Note [Channels-last batch norm]).
GradXFactors finish_grad_sums(const std::vector<float>& partial_g,
                              const std::vector<float>& partial_gx, int64_t blocks,
                              const Rows& rows, const std::vector<float>& mean, const Tensor& gamma,
                              const Tensor& save_var, float eps, Tensor& grad_gamma,
                              Tensor& grad_beta) {
  const auto channels = static_cast<size_t>(rows.channels);
  const float* g = gamma.data<float>();
  const float* v = save_var.data<float>();
  float* out_gamma = grad_gamma.data<float>();
  float* out_beta = grad_beta.data<float>();
  const auto count = static_cast<double>(rows.count);
  GradXFactors f{std::vector<float>(channels), std::vector<float>(channels),
                 std::vector<float>(channels)};
  for (size_t c = 0; c < channels; ++c) {
    double sum_g = 0.0, sum_gx = 0.0;
    for (int64_t blk = 0; blk < blocks; ++blk) {
      sum_g += partial_g[blk * rows.channels + c];
      sum_gx += partial_gx[blk * rows.channels + c];
    }
    const double invstd = 1.0 / std::sqrt(static_cast<double>(v[c]) + eps);
    out_beta[c] = static_cast<float>(sum_g);
    out_gamma[c] = static_cast<float>(sum_gx * invstd);
    // grad_x = gamma * invstd * (grad_y - mean(grad_y) - (x - mean) * invstd^2 * mean(grad_y * (x -
    // mean)))
    const double scale = g[c] * invstd;
    const double slope = -scale * invstd * invstd * sum_gx / count;
    f.a[c] = static_cast<float>(scale);
    f.b[c] = static_cast<float>(slope);
    f.d[c] = static_cast<float>(-scale * sum_g / count - slope * mean[c]);
  }
  return f;
}

// grad_residual, when defined, receives grad_y through the ReLU (the fused batch norm + add +
// ReLU's residual gradient) in the sums' pass; the grad_x pass then reads it alone.
template <typename T>
void backward(const Tensor& grad_y, const Tensor& relu_output, const Tensor& x, const Tensor& gamma,
              const Tensor& save_mean, const Tensor& save_var, float eps, Tensor& grad_x,
              Tensor& grad_gamma, Tensor& grad_beta, Tensor& grad_residual) {
  const Rows rows = rows_of(x);
  const T* gy = grad_y.data<T>();
  const T* in = x.data<T>();
  const T* y = relu_output.defined() ? relu_output.data<T>() : nullptr;
  T* masked = grad_residual.defined() ? grad_residual.data<T>() : nullptr;
  const std::vector<float> mean = host_values(save_mean);

  const int64_t blocks = std::min(kBlocks, std::max<int64_t>(rows.count, 1));
  std::vector<float> partial_g(static_cast<size_t>(blocks * rows.channels));
  std::vector<float> partial_gx(partial_g.size());
  parallel_for(blocks, 1, [&](int64_t first, int64_t last) {
    for (int64_t blk = first; blk < last; ++blk) {
      grad_sums_rows(gy, y, in, mean.data(), block_begin(blk, blocks, rows.count),
                     block_begin(blk + 1, blocks, rows.count), rows.channels,
                     partial_g.data() + blk * rows.channels,
                     partial_gx.data() + blk * rows.channels, masked);
    }
  });
  const GradXFactors f = finish_grad_sums(partial_g, partial_gx, blocks, rows, mean, gamma,
                                          save_var, eps, grad_gamma, grad_beta);
  // The masked gradient is g already: no ReLU left to apply.
  const T* g = masked != nullptr ? masked : gy;
  const T* mask = masked != nullptr ? nullptr : y;
  T* out = grad_x.data<T>();
  const int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(rows.channels, 1));
  parallel_for(rows.count, grain, [&](int64_t begin, int64_t end) {
    backward_rows(g, mask, in, f.a.data(), f.b.data(), f.d.data(), begin, end, rows.channels, out);
  });
}

}  // namespace

void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 float eps, bool relu, const Tensor& residual, Tensor& y,
                                 Tensor& save_mean, Tensor& save_var) {
  check_kernel_dtypes("batch_norm", x.dtype(), {&residual, &y});
  TANDEM_CHECK(relu || !residual.defined(), "[batch_norm] a residual comes with the ReLU");
  dispatch_float_types(x.dtype(), "batch_norm", [&](auto type) {
    forward_training<decltype(type)>(x, gamma, beta, eps, relu, residual, y, save_mean, save_var);
  });
}

void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& mean, const Tensor& var, float eps, Tensor& y) {
  check_kernel_dtypes("batch_norm", x.dtype(), {&y});
  dispatch_float_types(x.dtype(), "batch_norm", [&](auto type) {
    forward_inference<decltype(type)>(x, gamma, beta, mean, var, eps, y);
  });
}

void batch_norm_backward(const Tensor& grad_y, const Tensor& relu_output, const Tensor& x,
                         const Tensor& gamma, const Tensor& save_mean, const Tensor& save_var,
                         float eps, Tensor& grad_x, Tensor& grad_gamma, Tensor& grad_beta,
                         Tensor& grad_residual) {
  check_kernel_dtypes("batch_norm_backward", x.dtype(),
                      {&grad_y, &relu_output, &grad_x, &grad_residual});
  TANDEM_CHECK(relu_output.defined() || !grad_residual.defined(),
               "[batch_norm_backward] a residual's gradient needs the ReLU's output");
  dispatch_float_types(x.dtype(), "batch_norm_backward", [&](auto type) {
    backward<decltype(type)>(grad_y, relu_output, x, gamma, save_mean, save_var, eps, grad_x,
                             grad_gamma, grad_beta, grad_residual);
  });
}

}  // namespace tandem::cpu::channels_last
