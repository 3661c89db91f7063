#pragma once
/// The CUDA backend: cuBLAS for GEMM, cuDNN for convolution and float32 batch norm, Tandem's own
/// kernels (the .cu files) for everything else. The methods are defined across the files of this
/// folder, one per op family, mirroring engine/cpu.
///
/// Every method runs on the device of its tensors (made current for the call) and queues its
/// work on that device's current stream (Note [Current stream] in stream.h); it returns before
/// the work has run, except copies to the host and the label check of cross_entropy_forward,
/// which wait for it.

#include <atomic>

#include "engine/backend/backend.h"

namespace tandem::cuda {

class CudaBackend final : public Backend {
 public:
  /// Reads TANDEM_ALLOW_TF32=1 and TANDEM_CUDNN_BENCHMARK=0 from the environment.
  CudaBackend();

  /// TF32 tensor cores for cuBLAS GEMM and cuDNN convolutions: several times faster on A100/H100,
  /// with a 10-bit mantissa (about 1e-3 relative error). Off by default, so results match the
  /// CPU to float32 rounding.
  void set_allow_tf32(bool allow) { allow_tf32_ = allow; }
  bool allow_tf32() const { return allow_tf32_; }
  /// Convolution algorithms chosen by running each candidate once per shape (cudnnFind*, like
  /// torch.backends.cudnn.benchmark), else by cuDNN's heuristics (cudnnGet*_v7). On by default.
  void set_cudnn_benchmark(bool benchmark) { cudnn_benchmark_ = benchmark; }
  bool cudnn_benchmark() const { return cudnn_benchmark_; }

  // copy.cpp
  void copy(const Tensor& src, Tensor& dst) override;
  void fill(Tensor& dst, double value) override;
  void cast(const Tensor& src, Tensor& dst) override;

  // elementwise.cpp
  void unary(UnaryOp op, const Tensor& in, float scalar, Tensor& out) override;
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) override;
  void sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buffer,
                const SgdStepOptions& options) override;
  void sgd_step_multi(const std::vector<SgdTensors>& tensors,
                      const SgdStepOptions& options) override;

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

  // batch_norm.cpp: save_inv_std is 1 / sqrt(var + eps) (Note [Batch-norm statistics] in
  // engine/backend/backend.h).
  void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   const BatchNormRunning& running, float eps, Tensor& y,
                                   Tensor& save_mean, Tensor& save_inv_std) override;
  void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    const Tensor& running_mean, const Tensor& running_var,
                                    float eps, Tensor& y) override;
  void batch_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& gamma,
                           const Tensor& save_mean, const Tensor& save_inv_std, float eps,
                           Tensor& grad_x, Tensor& grad_gamma, Tensor& grad_beta) override;
  /// bfloat16 only (Note [Own batch-norm kernels] in batch_norm.cpp); float32 stays on cuDNN.
  bool fuses_batch_norm_relu(const Tensor& x) const override;
  void batch_norm_relu_forward_training(const Tensor& x, const Tensor& residual,
                                        const Tensor& gamma, const Tensor& beta,
                                        const BatchNormRunning& running, float eps, Tensor& y,
                                        Tensor& save_mean, Tensor& save_inv_std) override;
  void batch_norm_relu_backward(const Tensor& grad_y, const Tensor& y, const Tensor& x,
                                const Tensor& gamma, const Tensor& save_mean,
                                const Tensor& save_inv_std, float eps, Tensor& grad_x,
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

 private:
  std::atomic<bool> allow_tf32_{false};
  std::atomic<bool> cudnn_benchmark_{true};
};

/// The process-wide CUDA backend (what backend_for(cuda:i) returns).
CudaBackend& backend();

/// CudaBackend::sum() that may also sum bfloat16 into float32 (conv2d's bias gradient from
/// bfloat16 activations: Note [bfloat16 activations] keeps a bias and its gradient float32).
void sum_into(const Tensor& in, const std::vector<int64_t>& dims, Tensor& out);

}  // namespace tandem::cuda
