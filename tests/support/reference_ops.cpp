#include "tests/support/reference_ops.h"

#include <cmath>
#include <limits>

namespace tandem::testing {

void PrintTo(const ConvShape& s, std::ostream* out) {
  *out << "x [" << s.n << ", " << s.c << ", " << s.h << ", " << s.w << "] w [" << s.k << ", " << s.c
       << ", " << s.r << ", " << s.s << "] stride " << s.stride << " padding " << s.padding;
}

Values reference_conv2d(const ConvShape& s, const Values& x, const Values& weight,
                        const Values& bias) {
  const int64_t p = s.p(), q = s.q();
  Values y(static_cast<size_t>(s.n * s.k * p * q));
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t k = 0; k < s.k; ++k)
      for (int64_t i = 0; i < p; ++i)
        for (int64_t j = 0; j < q; ++j) {
          double total = bias.empty() ? 0.0 : bias[k];
          for (int64_t c = 0; c < s.c; ++c)
            for (int64_t r = 0; r < s.r; ++r)
              for (int64_t t = 0; t < s.s; ++t) {
                const int64_t row = i * s.stride - s.padding + r;
                const int64_t col = j * s.stride - s.padding + t;
                if (row < 0 || row >= s.h || col < 0 || col >= s.w) continue;
                total += double(x[((b * s.c + c) * s.h + row) * s.w + col]) *
                         weight[((k * s.c + c) * s.r + r) * s.s + t];
              }
          y[((b * s.k + k) * p + i) * q + j] = static_cast<float>(total);
        }
  return y;
}

void reference_conv2d_backward(const ConvShape& s, const Values& x, const Values& weight,
                               const Values& grad_y, Values& grad_x, Values& grad_weight,
                               Values& grad_bias) {
  const int64_t p = s.p(), q = s.q();
  std::vector<double> gx(x.size(), 0.0), gw(weight.size(), 0.0), gb(static_cast<size_t>(s.k), 0.0);
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t k = 0; k < s.k; ++k)
      for (int64_t i = 0; i < p; ++i)
        for (int64_t j = 0; j < q; ++j) {
          const double g = grad_y[((b * s.k + k) * p + i) * q + j];
          gb[k] += g;
          for (int64_t c = 0; c < s.c; ++c)
            for (int64_t r = 0; r < s.r; ++r)
              for (int64_t t = 0; t < s.s; ++t) {
                const int64_t row = i * s.stride - s.padding + r;
                const int64_t col = j * s.stride - s.padding + t;
                if (row < 0 || row >= s.h || col < 0 || col >= s.w) continue;
                const size_t xi = ((b * s.c + c) * s.h + row) * s.w + col;
                const size_t wi = ((k * s.c + c) * s.r + r) * s.s + t;
                gx[xi] += g * weight[wi];
                gw[wi] += g * x[xi];
              }
        }
  grad_x.assign(gx.begin(), gx.end());
  grad_weight.assign(gw.begin(), gw.end());
  grad_bias.assign(gb.begin(), gb.end());
}

namespace {

struct ChannelStatistics {
  double mean, var;  ///< var is biased (divides by the count), as batch norm normalises with it
};

// x: (N, C, HW), statistics of channel ch over (N, HW).
ChannelStatistics channel_statistics(int64_t n, int64_t c, int64_t hw, const Values& x,
                                     int64_t ch) {
  double total = 0.0, squares = 0.0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < hw; ++i) total += x[(b * c + ch) * hw + i];
  const double mean = total / double(n * hw);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < hw; ++i) {
      const double d = x[(b * c + ch) * hw + i] - mean;
      squares += d * d;
    }
  return {mean, squares / double(n * hw)};
}

}  // namespace

Values reference_batch_norm(int64_t n, int64_t c, int64_t hw, const Values& x, const Values& gamma,
                            const Values& beta, float eps, Values& mean, Values& var) {
  Values y(x.size());
  mean.assign(static_cast<size_t>(c), 0.0f);
  var.assign(static_cast<size_t>(c), 0.0f);
  for (int64_t ch = 0; ch < c; ++ch) {
    const auto [m, v] = channel_statistics(n, c, hw, x, ch);
    mean[ch] = static_cast<float>(m);
    var[ch] = static_cast<float>(v);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < hw; ++i) {
        const size_t at = (b * c + ch) * hw + i;
        y[at] = static_cast<float>((x[at] - m) / std::sqrt(v + eps) * gamma[ch] + beta[ch]);
      }
  }
  return y;
}

// With x̂ = (x - mean) * invstd and M = N·HW values per channel:
//   grad_beta = Σ g,  grad_gamma = Σ g·x̂,
//   grad_x = gamma · invstd / M · (M·g - grad_beta - x̂ · grad_gamma).
void reference_batch_norm_backward(int64_t n, int64_t c, int64_t hw, const Values& x,
                                   const Values& gamma, const Values& grad_y, float eps,
                                   Values& grad_x, Values& grad_gamma, Values& grad_beta) {
  grad_x.assign(x.size(), 0.0f);
  grad_gamma.assign(static_cast<size_t>(c), 0.0f);
  grad_beta.assign(static_cast<size_t>(c), 0.0f);
  const double count = double(n * hw);
  for (int64_t ch = 0; ch < c; ++ch) {
    const auto [mean, var] = channel_statistics(n, c, hw, x, ch);
    const double invstd = 1.0 / std::sqrt(var + eps);
    double sum_g = 0.0, sum_g_xhat = 0.0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < hw; ++i) {
        const size_t at = (b * c + ch) * hw + i;
        sum_g += grad_y[at];
        sum_g_xhat += grad_y[at] * (x[at] - mean) * invstd;
      }
    grad_beta[ch] = static_cast<float>(sum_g);
    grad_gamma[ch] = static_cast<float>(sum_g_xhat);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < hw; ++i) {
        const size_t at = (b * c + ch) * hw + i;
        const double x_hat = (x[at] - mean) * invstd;
        grad_x[at] = static_cast<float>(gamma[ch] * invstd / count *
                                        (count * grad_y[at] - sum_g - x_hat * sum_g_xhat));
      }
  }
}

Values reference_max_pool2d(int64_t n, int64_t c, int64_t h, int64_t w, int64_t kernel,
                            int64_t stride, int64_t padding, const Values& x, const Values& grad_y,
                            Values& grad_x) {
  const int64_t p = (h + 2 * padding - kernel) / stride + 1;
  const int64_t q = (w + 2 * padding - kernel) / stride + 1;
  Values y(static_cast<size_t>(n * c * p * q));
  grad_x.assign(x.size(), 0.0f);
  for (int64_t plane = 0; plane < n * c; ++plane)
    for (int64_t i = 0; i < p; ++i)
      for (int64_t j = 0; j < q; ++j) {
        float best = -std::numeric_limits<float>::infinity();
        int64_t best_at = -1;
        for (int64_t r = 0; r < kernel; ++r)
          for (int64_t t = 0; t < kernel; ++t) {
            const int64_t row = i * stride - padding + r, col = j * stride - padding + t;
            if (row < 0 || row >= h || col < 0 || col >= w) continue;
            const int64_t at = (plane * h + row) * w + col;
            // As PyTorch: the first maximum wins, and any NaN wins over numbers (the last one).
            if (best_at < 0 || x[at] > best || std::isnan(x[at])) best = x[at], best_at = at;
          }
        const size_t out = (plane * p + i) * q + j;
        y[out] = best;
        if (!grad_y.empty()) grad_x[best_at] += grad_y[out];
      }
  return y;
}

Values reference_adaptive_avg_pool2d(int64_t n, int64_t c, int64_t h, int64_t w, int64_t out_h,
                                     int64_t out_w, const Values& x) {
  Values y(static_cast<size_t>(n * c * out_h * out_w));
  for (int64_t plane = 0; plane < n * c; ++plane)
    for (int64_t i = 0; i < out_h; ++i)
      for (int64_t j = 0; j < out_w; ++j) {
        const int64_t r0 = static_cast<int64_t>(std::floor(double(i * h) / out_h));
        const int64_t r1 = static_cast<int64_t>(std::ceil(double((i + 1) * h) / out_h));
        const int64_t c0 = static_cast<int64_t>(std::floor(double(j * w) / out_w));
        const int64_t c1 = static_cast<int64_t>(std::ceil(double((j + 1) * w) / out_w));
        double total = 0.0;
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t t = c0; t < c1; ++t) total += x[(plane * h + r) * w + t];
        y[(plane * out_h + i) * out_w + j] =
            static_cast<float>(total / double((r1 - r0) * (c1 - c0)));
      }
  return y;
}

}  // namespace tandem::testing
