// Row-wise log-softmax and the fused softmax cross-entropy.

#include <cmath>

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/parallel.h"

namespace tandem::cpu {
namespace {

// y = x - max - log(sum(exp(x - max))), stable for large logits.
void log_softmax_row(const float* x, float* y, int64_t k) {
  float max = x[0];
  for (int64_t j = 1; j < k; ++j) max = std::max(max, x[j]);
  double total = 0.0;
  for (int64_t j = 0; j < k; ++j) total += std::exp(static_cast<double>(x[j] - max));
  // (x - max) first: folding max into the shift would lose precision for large logits.
  const float log_total = static_cast<float>(std::log(total));
  for (int64_t j = 0; j < k; ++j) y[j] = (x[j] - max) - log_total;
}

}  // namespace

void CpuBackend::log_softmax_forward(const Tensor& x, Tensor& y) {
  const int64_t k = x.size(1);
  const float* in = x.data<float>();
  float* out = y.data<float>();
  parallel_for(x.size(0), 256, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) log_softmax_row(in + r * k, out + r * k, k);
  });
}

void CpuBackend::log_softmax_backward(const Tensor& grad_y, const Tensor& y, Tensor& grad_x) {
  const int64_t k = y.size(1);
  const float* g = grad_y.data<float>();
  const float* out = y.data<float>();
  float* gx = grad_x.data<float>();
  parallel_for(y.size(0), 256, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      double total = 0.0;
      for (int64_t j = 0; j < k; ++j) total += g[r * k + j];
      for (int64_t j = 0; j < k; ++j) {
        gx[r * k + j] = g[r * k + j] - std::exp(out[r * k + j]) * static_cast<float>(total);
      }
    }
  });
}

void CpuBackend::cross_entropy_forward(const Tensor& logits, const Tensor& labels, Tensor& loss,
                                       Tensor& log_probs) {
  const int64_t n = logits.size(0);
  const int64_t k = logits.size(1);
  const int64_t* target = labels.data<int64_t>();
  for (int64_t r = 0; r < n; ++r) {
    TANDEM_CHECK(target[r] >= 0 && target[r] < k, "[cross_entropy] label ", target[r], " at row ",
                 r, " is outside [0, ", k, ")");
  }
  log_softmax_forward(logits, log_probs);
  const float* lp = log_probs.data<float>();
  double total = 0.0;
  for (int64_t r = 0; r < n; ++r) total -= lp[r * k + target[r]];
  *loss.data<float>() = n == 0 ? 0.0f : static_cast<float>(total / static_cast<double>(n));
}

void CpuBackend::cross_entropy_backward(const Tensor& grad_loss, const Tensor& log_probs,
                                        const Tensor& labels, Tensor& grad_logits) {
  const int64_t n = log_probs.size(0);
  const int64_t k = log_probs.size(1);
  const float scale = *grad_loss.data<float>() / static_cast<float>(std::max<int64_t>(n, 1));
  const float* lp = log_probs.data<float>();
  const int64_t* target = labels.data<int64_t>();
  float* g = grad_logits.data<float>();
  parallel_for(n, 256, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t j = 0; j < k; ++j) g[r * k + j] = std::exp(lp[r * k + j]) * scale;
      g[r * k + target[r]] -= scale;
    }
  });
}

}  // namespace tandem::cpu
