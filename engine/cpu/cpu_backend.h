#pragma once
/// The CPU backend: oneDNN for convolution, batch-norm and GEMM; plain C++ with
/// OpenMP for elementwise ops, pooling, reductions, softmax/loss and SGD. The
/// methods are defined across the files of this folder, one per op family.

#include "engine/backend/backend.h"

namespace tandem::cpu {

class CpuBackend final : public Backend {
 public:
  bool channels_last_kernels() const override { return true; }

  // copy.cpp
  void copy(const Tensor& src, Tensor& dst) override;
  void fill(Tensor& dst, double value) override;
  void cast(const Tensor& src, Tensor& dst) override;

  // elementwise.cpp
  void unary(UnaryOp op, const Tensor& in, float scalar, Tensor& out) override;
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) override;

  // reduce.cpp
  void sum(const Tensor& in, const std::vector<int64_t>& dims, Tensor& out) override;
  void argmax_rows(const Tensor& in, Tensor& out) override;

  // matmul.cpp
  void gemm(bool transpose_a, bool transpose_b, float alpha, const Tensor& a, const Tensor& b,
            float beta, Tensor& c) override;

  // conv.cpp
  void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias,
                      const Conv2dOptions& options, Tensor& y) override;
  void conv2d_backward_input(const Tensor& grad_y, const Tensor& w, const Conv2dOptions& options,
                             Tensor& grad_x) override;
  void conv2d_backward_weight(const Tensor& grad_y, const Tensor& x, const Conv2dOptions& options,
                              Tensor& grad_w, Tensor& grad_bias) override;

  // batch_norm.cpp
  void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   const BatchNormRunning& running, float eps, Tensor& y,
                                   Tensor& save_mean, Tensor& save_var) override;
  void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    const Tensor& running_mean, const Tensor& running_var,
                                    float eps, Tensor& y) override;
  void batch_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& gamma,
                           const Tensor& save_mean, const Tensor& save_var, float eps,
                           Tensor& grad_x, Tensor& grad_gamma, Tensor& grad_beta) override;
  bool fuses_batch_norm_relu(const Tensor& x) const override;
  void batch_norm_relu_forward_training(const Tensor& x, const Tensor& residual,
                                        const Tensor& gamma, const Tensor& beta,
                                        const BatchNormRunning& running, float eps, Tensor& y,
                                        Tensor& save_mean, Tensor& save_var) override;
  void batch_norm_relu_backward(const Tensor& grad_y, const Tensor& y, const Tensor& x,
                                const Tensor& gamma, const Tensor& save_mean,
                                const Tensor& save_var, float eps, Tensor& grad_x,
                                Tensor& grad_gamma, Tensor& grad_beta,
                                Tensor& grad_residual) override;

  // pool.cpp
  void max_pool2d_forward(const Tensor& x, const Pool2dOptions& options, Tensor& y,
                          Tensor& workspace) override;
  void max_pool2d_backward(const Tensor& grad_y, const Tensor& x, const Tensor& y,
                           const Tensor& workspace, const Pool2dOptions& options,
                           Tensor& grad_x) override;
  void adaptive_avg_pool2d_forward(const Tensor& x, Tensor& y) override;
  void adaptive_avg_pool2d_backward(const Tensor& grad_y, Tensor& grad_x) override;

  // loss.cpp
  void log_softmax_forward(const Tensor& x, Tensor& y) override;
  void log_softmax_backward(const Tensor& grad_y, const Tensor& y, Tensor& grad_x) override;
  void cross_entropy_forward(const Tensor& logits, const Tensor& labels, Tensor& loss,
                             Tensor& log_probs) override;
  void cross_entropy_backward(const Tensor& grad_loss, const Tensor& log_probs,
                              const Tensor& labels, Tensor& grad_logits) override;

  // sgd.cpp
  void sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buffer,
                const SgdStepOptions& options) override;
};

CpuBackend& backend();

}  // namespace tandem::cpu
