#pragma once
/// Naive reference implementations (plain loops, double accumulation) that the
/// oneDNN-backed kernels are compared against. Clear over fast. Layout NCHW.

#include <cstdint>
#include <ostream>
#include <vector>

namespace tandem::testing {

using Values = std::vector<float>;

struct ConvShape {
  int64_t n, c, h, w;  ///< input
  int64_t k, r, s;     ///< output channels, kernel rows, kernel columns
  int64_t stride, padding;
  int64_t p() const { return (h + 2 * padding - r) / stride + 1; }
  int64_t q() const { return (w + 2 * padding - s) / stride + 1; }
};
/// For test failure messages: "x [N, C, H, W] w [K, C, R, S] stride 1 padding 1".
void PrintTo(const ConvShape& shape, std::ostream* out);

/// y: (N, K, P, Q); bias may be empty.
Values reference_conv2d(const ConvShape& shape, const Values& x, const Values& weight,
                        const Values& bias);
/// Gradients of Σ y·grad_y: with respect to x (N, C, H, W), weight (K, C, R, S) and bias (K).
void reference_conv2d_backward(const ConvShape& shape, const Values& x, const Values& weight,
                               const Values& grad_y, Values& grad_x, Values& grad_weight,
                               Values& grad_bias);

/// Training-mode batch norm of x: (N, C, HW); mean and biased var per channel are returned too.
Values reference_batch_norm(int64_t n, int64_t c, int64_t hw, const Values& x, const Values& gamma,
                            const Values& beta, float eps, Values& mean, Values& var);
/// Gradients of Σ y·grad_y for training-mode batch norm (batch statistics depend on x too).
void reference_batch_norm_backward(int64_t n, int64_t c, int64_t hw, const Values& x,
                                   const Values& gamma, const Values& grad_y, float eps,
                                   Values& grad_x, Values& grad_gamma, Values& grad_beta);

/// Max pooling (padding never wins) and its gradient, routed to the first maximum of each window.
Values reference_max_pool2d(int64_t n, int64_t c, int64_t h, int64_t w, int64_t kernel,
                            int64_t stride, int64_t padding, const Values& x, const Values& grad_y,
                            Values& grad_x);

/// torch.nn.AdaptiveAvgPool2d.
Values reference_adaptive_avg_pool2d(int64_t n, int64_t c, int64_t h, int64_t w, int64_t out_h,
                                     int64_t out_w, const Values& x);

}  // namespace tandem::testing
