#pragma once
/// Backend: the kernels of one device type, on top of its runtime (engine/device_runtime.h). Op
/// front-ends (engine/ops/) check their arguments, allocate outputs, call these kernels through
/// backend_for(device), and record autograd; the kernels only compute. Only the engine's op and
/// backend folders include this header (the layering test, Note [Runtime apart from kernels] in
/// device_runtime.h); the rest of Tandem calls ops.
///
/// Kernel contract, unless a method says otherwise:
/// - all tensors live on one device of this backend and are contiguous; where
///   channels_last_kernels() is true, the 4-D activations of convolution, batch norm and
///   pooling (x, y and their gradients) may instead all be channels-last (Note [Memory
///   formats]), and convolution weights dense in either format;
/// - outputs are allocated by the caller with the right shape and dtype;
/// - compute ops take float32; the activation ops also take bfloat16 (Note [bfloat16
///   activations]).
/// Shapes are written beside each kernel: (N, C, H, W) is NCHW.
///
/// Note [bfloat16 activations]: mixed precision (nn/precision.h) keeps weights, optimizer state,
/// batch-norm statistics and the loss in float32 and the activations between layers, with their
/// gradients, in bfloat16. So these kernels take bfloat16 as well as float32, every float tensor
/// of one call in one dtype except where said, computing in float32 (each element widened on
/// load, rounded once on store, sums accumulated in float32):
/// - conv2d_*: x, w, y and their gradients; a bias and its gradient stay float32;
/// - batch_norm_* (and the fused ReLU ones): x, y and their gradients; gamma, beta, running and
///   saved statistics, grad_gamma and grad_beta stay float32;
/// - unary Relu, binary Add, AddRelu, ReluBackward; sum(); the pooling kernels;
/// - gemm: a and b bfloat16 with c float32 (float32 accumulation, oneDNN's and cuBLAS's
///   bf16bf16f32 GEMM), alpha and beta as for float32.
/// Other kernels take float32 only; a backend that lacks a bfloat16 kernel throws, naming it.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "engine/backend/elementwise_op.h"
#include "engine/backend/op_options.h"
#include "engine/device.h"
#include "engine/device_runtime.h"
#include "engine/tensor.h"

namespace tandem {

class Backend {
 public:
  virtual ~Backend() = default;

  /// Whether convolution, batch norm and pooling take channels-last tensors as they are; where
  /// not, the op front-ends hand them contiguous copies and convert the results back.
  virtual bool channels_last_kernels() const { return false; }

  // --- memory. copy() may be called with src or dst on another device (one of them is this
  // backend's); src may be strided, dst is contiguous; same dtype and numel.
  virtual void copy(const Tensor& src, Tensor& dst) = 0;
  virtual void fill(Tensor& dst, double value) = 0;
  /// Converts between dtypes element by element (float→int truncates toward zero; bfloat16 and
  /// float16 go through float, rounding to nearest even: Note [Half conversions]).
  virtual void cast(const Tensor& src, Tensor& dst) = 0;

  // --- elementwise. binary(): a and b are contiguous and broadcast to out's shape; out may
  // alias a (in-place accumulation). scalar is used by the *Scalar unary ops; AddScalar also
  // takes int64 in and out (a whole-number scalar), for counters kept on the device.
  virtual void unary(UnaryOp op, const Tensor& in, float scalar, Tensor& out) = 0;
  virtual void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) = 0;

  // --- reductions
  /// out has in's shape with each reduced dim set to 1.
  virtual void sum(const Tensor& in, const std::vector<int64_t>& dims, Tensor& out) = 0;
  /// in: (N, K) float32 → out: (N) int64, first maximum wins.
  virtual void argmax_rows(const Tensor& in, Tensor& out) = 0;

  // --- matmul: c = alpha * op(a) @ op(b) + beta * c, all 2-D row-major.
  virtual void gemm(bool transpose_a, bool transpose_b, float alpha, const Tensor& a,
                    const Tensor& b, float beta, Tensor& c) = 0;

  // --- convolution. x: (N, C, H, W), w: (K, C, R, S), bias: (K) or undefined, y: (N, K, P, Q)
  virtual void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias,
                              const Conv2dOptions& options, Tensor& y) = 0;
  virtual void conv2d_backward_input(const Tensor& grad_y, const Tensor& w,
                                     const Conv2dOptions& options, Tensor& grad_x) = 0;
  /// grad_bias may be undefined (no bias).
  virtual void conv2d_backward_weight(const Tensor& grad_y, const Tensor& x,
                                      const Conv2dOptions& options, Tensor& grad_w,
                                      Tensor& grad_bias) = 0;

  // --- batch norm over (N, H, W) per channel. gamma, beta, mean: (C). Note [Batch-norm
  // statistics]: save_mean (the batch mean) and save_spread are outputs of the training forward
  // that only the same backend's backward reads, like max_pool2d's workspace. save_spread holds
  // the batch's spread in the form that backend's backward takes: the biased variance on the
  // CPU (oneDNN's), 1 / sqrt(var + eps) on CUDA (cuDNN's and the own kernels'), so neither
  // converts. Nothing else reads them: the running statistics are the kernels' own business.
  /// Batch statistics; `running`, when defined, is updated in place with them (N * H * W > 1).
  virtual void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                           const BatchNormRunning& running, float eps, Tensor& y,
                                           Tensor& save_mean, Tensor& save_spread) = 0;
  virtual void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma,
                                            const Tensor& beta, const Tensor& running_mean,
                                            const Tensor& running_var, float eps, Tensor& y) = 0;
  virtual void batch_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& gamma,
                                   const Tensor& save_mean, const Tensor& save_spread, float eps,
                                   Tensor& grad_x, Tensor& grad_gamma, Tensor& grad_beta) = 0;
  /// Whether the batch_norm_relu_* kernels take `x` (with or without a residual); where not, the
  /// front-end runs batch norm, then ReLU or add_relu, one after the other (the defaults below
  /// throw).
  virtual bool fuses_batch_norm_relu(const Tensor& x) const { return false; }
  /// batch_norm_forward_training, then y = max(y, 0), in the same pass over y; with a residual
  /// (x's shape, format and dtype; undefined: none), y = max(y + residual, 0): a residual block's
  /// second batch norm, shortcut sum and ReLU in one pass.
  virtual void batch_norm_relu_forward_training(const Tensor& x, const Tensor& residual,
                                                const Tensor& gamma, const Tensor& beta,
                                                const BatchNormRunning& running, float eps,
                                                Tensor& y, Tensor& save_mean, Tensor& save_spread);
  /// batch_norm_backward of the fused op: grad_y is the gradient of the ReLU's output y, so
  /// batch norm sees zero where y is not positive. grad_residual, when defined, receives that
  /// masked gradient, the residual's gradient (the forward's residual was added before the ReLU).
  virtual void batch_norm_relu_backward(const Tensor& grad_y, const Tensor& y, const Tensor& x,
                                        const Tensor& gamma, const Tensor& save_mean,
                                        const Tensor& save_spread, float eps, Tensor& grad_x,
                                        Tensor& grad_gamma, Tensor& grad_beta,
                                        Tensor& grad_residual);

  // --- pooling. x: (N, C, H, W), y: (N, C, P, Q)
  /// workspace is allocated by the backend: whatever its backward needs besides x and y.
  virtual void max_pool2d_forward(const Tensor& x, const Pool2dOptions& options, Tensor& y,
                                  Tensor& workspace) = 0;
  virtual void max_pool2d_backward(const Tensor& grad_y, const Tensor& x, const Tensor& y,
                                   const Tensor& workspace, const Pool2dOptions& options,
                                   Tensor& grad_x) = 0;
  /// Output size is y's (P, Q); bins as torch.nn.AdaptiveAvgPool2d.
  virtual void adaptive_avg_pool2d_forward(const Tensor& x, Tensor& y) = 0;
  virtual void adaptive_avg_pool2d_backward(const Tensor& grad_y, Tensor& grad_x) = 0;

  // --- softmax and loss. logits: (N, K), labels: (N) int64.
  virtual void log_softmax_forward(const Tensor& x, Tensor& y) = 0;
  virtual void log_softmax_backward(const Tensor& grad_y, const Tensor& y, Tensor& grad_x) = 0;
  /// loss: () mean negative log-likelihood; log_probs: (N, K) saved for backward.
  /// Throws when a label is outside [0, K).
  virtual void cross_entropy_forward(const Tensor& logits, const Tensor& labels, Tensor& loss,
                                     Tensor& log_probs) = 0;
  /// grad_loss: () → grad_logits = grad_loss * (softmax - onehot) / N.
  virtual void cross_entropy_backward(const Tensor& grad_loss, const Tensor& log_probs,
                                      const Tensor& labels, Tensor& grad_logits) = 0;

  // --- optimizer: updates param and momentum_buffer in place.
  virtual void sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buffer,
                        const SgdStepOptions& options) = 0;
  /// sgd_step() over a list of parameters of one device with the same options, each element
  /// computed exactly as sgd_step() computes it. The default loops over sgd_step(); a GPU
  /// backend overrides it to update many tensors per kernel launch.
  virtual void sgd_step_multi(const std::vector<SgdTensors>& tensors,
                              const SgdStepOptions& options);
};

/// The backend that runs kernels for `device`. CUDA in a build without CUDA throws.
Backend& backend_for(Device device);

/// Defined by engine/cuda when Tandem is built with CUDA, else by engine/no_cuda (throws).
Backend& cuda_backend();

}  // namespace tandem
