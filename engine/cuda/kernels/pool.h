#pragma once
/// Bodies of the pooling kernels (pool.cu): max pooling that remembers each window's argmax,
/// adaptive average pooling with PyTorch's bins. Both backwards gather per input element (each
/// thread sums the windows that contain its element) instead of scattering with atomics:
/// deterministic, and no zero-fill pass. Templates on the element type T, float or bfloat16
/// (Note [Element types] in types.h). Note [Kernel bodies] in grid.h.

#include <cmath>
#include <cstdint>

#include "engine/backend/adaptive_bins.h"
#include "engine/cuda/kernels/grid.h"
#include "engine/cuda/kernels/types.h"
#include "engine/host_device.h"

namespace tandem::cuda::kernels {

/// x: (N, C, H, W) → y, argmax: (N, C, P, Q); n = N * C * P * Q
template <typename T = float>
struct MaxPool2dForwardBody {
  const T* x;
  PoolShape s;
  T* y;
  int32_t* argmax;
  int64_t n;
  TANDEM_HD void operator()(int64_t i) const {
    const int64_t q = i % s.q;
    const int64_t p = (i / s.q) % s.p;
    const int64_t plane = i / (s.p * s.q);
    const T* in = x + plane * s.h * s.w;
    const int64_t h0 = p * s.stride - s.padding;
    const int64_t w0 = q * s.stride - s.padding;
    float best = -INFINITY;
    int64_t best_index = -1;
    for (int64_t h = max_of<int64_t>(h0, 0); h < min_of(h0 + s.kernel, s.h); ++h) {
      for (int64_t w = max_of<int64_t>(w0, 0); w < min_of(w0 + s.kernel, s.w); ++w) {
        const float v = widen(in[h * s.w + w]);
        // Strict: the first maximum in row-major order wins. A NaN always wins (the last one
        // of the window), as in PyTorch (Note [NaN through ReLU and max pooling] in
        // engine/cpu/elementwise.cpp).
        if (best_index < 0 || v > best || is_nan(v)) {
          best = v;
          best_index = h * s.w + w;
        }
      }
    }
    y[i] = narrow<T>(best);  // exact: best is one of the inputs
    argmax[i] = static_cast<int32_t>(best_index);
  }
};

/// grad_y, argmax: (N, C, P, Q) → grad_x: (N, C, H, W); n = N * C * H * W
template <typename T = float>
struct MaxPool2dBackwardBody {
  const T* grad_y;
  const int32_t* argmax;
  PoolShape s;
  T* grad_x;
  int64_t n;
  TANDEM_HD void operator()(int64_t i) const {
    const int64_t w = i % s.w;
    const int64_t h = (i / s.w) % s.h;
    const int64_t plane = i / (s.h * s.w);
    // Windows p with p * stride - padding <= h < p * stride - padding + kernel.
    const int64_t p_begin =
        h + s.padding < s.kernel ? 0 : (h + s.padding - s.kernel) / s.stride + 1;
    const int64_t p_end = min_of((h + s.padding) / s.stride + 1, s.p);
    const int64_t q_begin =
        w + s.padding < s.kernel ? 0 : (w + s.padding - s.kernel) / s.stride + 1;
    const int64_t q_end = min_of((w + s.padding) / s.stride + 1, s.q);
    const auto self = static_cast<int32_t>(h * s.w + w);
    const int64_t out_base = plane * s.p * s.q;
    float total_grad = 0.0f;
    for (int64_t p = p_begin; p < p_end; ++p) {
      for (int64_t q = q_begin; q < q_end; ++q) {
        const int64_t o = out_base + p * s.q + q;
        if (argmax[o] == self) total_grad += widen(grad_y[o]);
      }
    }
    grad_x[i] = narrow<T>(total_grad);
  }
};

/// x: (N, C, H, W) → y: (N, C, P, Q); n = N * C * P * Q
template <typename T = float>
struct AdaptiveAvgPool2dForwardBody {
  const T* x;
  PoolShape s;
  T* y;
  int64_t n;
  TANDEM_HD void operator()(int64_t i) const {
    const int64_t j = i % s.q;
    const int64_t k = (i / s.q) % s.p;
    const int64_t plane = i / (s.p * s.q);
    const T* in = x + plane * s.h * s.w;
    const int64_t r0 = bin_start(k, s.h, s.p), r1 = bin_end(k, s.h, s.p);
    const int64_t c0 = bin_start(j, s.w, s.q), c1 = bin_end(j, s.w, s.q);
    double total_value = 0.0;
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = c0; c < c1; ++c) total_value += widen(in[r * s.w + c]);
    }
    y[i] = narrow<T>(static_cast<float>(total_value / static_cast<double>((r1 - r0) * (c1 - c0))));
  }
};

/// grad_y: (N, C, P, Q) → grad_x: (N, C, H, W); n = N * C * H * W. Bins may overlap, so each
/// input element sums the share of every bin that contains it.
template <typename T = float>
struct AdaptiveAvgPool2dBackwardBody {
  const T* grad_y;
  PoolShape s;
  T* grad_x;
  int64_t n;
  TANDEM_HD void operator()(int64_t i) const {
    const int64_t w = i % s.w;
    const int64_t h = (i / s.w) % s.h;
    const int64_t plane = i / (s.h * s.w);
    // Bins k with bin_start(k) <= h < bin_end(k) lie in [h * P / H, (h + 1) * P / H]; the range
    // is widened by one on each side and every bin checked, so rounding cannot drop one.
    const int64_t k_begin = max_of<int64_t>((h * s.p) / s.h - 1, 0);
    const int64_t k_end = min_of<int64_t>(((h + 1) * s.p) / s.h + 2, s.p);
    const int64_t j_begin = max_of<int64_t>((w * s.q) / s.w - 1, 0);
    const int64_t j_end = min_of<int64_t>(((w + 1) * s.q) / s.w + 2, s.q);
    const T* g = grad_y + plane * s.p * s.q;
    float total_grad = 0.0f;
    for (int64_t k = k_begin; k < k_end; ++k) {
      const int64_t r0 = bin_start(k, s.h, s.p), r1 = bin_end(k, s.h, s.p);
      if (h < r0 || h >= r1) continue;
      for (int64_t j = j_begin; j < j_end; ++j) {
        const int64_t c0 = bin_start(j, s.w, s.q), c1 = bin_end(j, s.w, s.q);
        if (w < c0 || w >= c1) continue;
        total_grad += widen(g[k * s.q + j]) / static_cast<float>((r1 - r0) * (c1 - c0));
      }
    }
    grad_x[i] = narrow<T>(total_grad);
  }
};

}  // namespace tandem::cuda::kernels
