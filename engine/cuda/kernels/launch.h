#pragma once
/// Launchers of Tandem's own CUDA kernels (the .cu files of this folder). They take plain
/// pointers and sizes, never a Tensor: the backend's .cpp files check and unpack tensors, these
/// only launch. Each queues its kernel on `stream`, which must belong to the current device, and
/// checks the launch. Shapes are written beside each argument: (N, C, H, W) is NCHW.
///
/// The kernels of Note [bfloat16 activations] (engine/backend/backend.h) take their activations as
/// `void*` with an DType, float32 or bfloat16 (Note [Element types] in kernels/types.h);
/// one without a bfloat16 kernel for an op throws, naming it.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "engine/cuda/kernels/norm_plan.h"
#include "engine/cuda/kernels/ordered_keys.h"
#include "engine/cuda/kernels/sum_plan.h"
#include "engine/cuda/kernels/types.h"

namespace tandem::cuda::kernels {

// --- memory.cu

/// out: (n) elements of `element_size` bytes (1, 2, 4 or 8), each set to the bit pattern `bits`.
void fill(void* out, int64_t n, int element_size, uint64_t bits, cudaStream_t stream);
/// out: (n) of out_type ← in: (n) of in_type, element by element (float→int truncates toward 0;
/// a half type goes through float, to and from every other type).
void cast(const void* in, DType in_type, void* out, DType out_type, int64_t n, cudaStream_t stream);
/// out: contiguous, numel(src) elements of `element_size` bytes ← the strided view `src` of in.
void copy_strided(const void* in, const StridedLayout& src, void* out, int element_size,
                  cudaStream_t stream);
/// Keeps `stream` busy for `nanoseconds` (one thread spinning on the global timer).
void spin(long long nanoseconds, cudaStream_t stream);

// --- ordered_keys.cu: float32, bfloat16 or float16 values and their uint32 keys (Note [Ordered
// keys] in kernels/ordered_keys.h)

/// keys: (n) uint32 ← the ordered keys of in: (n) of `type`, for `reduction`.
void to_ordered_keys(const void* in, DType type, KeyReduction reduction, uint32_t* keys, int64_t n,
                     cudaStream_t stream);
/// out: (n) of `type` ← the values whose keys are keys: (n); every NaN as a quiet NaN.
void from_ordered_keys(const uint32_t* keys, DType type, void* out, int64_t n, cudaStream_t stream);

// --- elementwise.cu

/// out: (n) = op(in: (n), scalar), both of `type` (bfloat16: Relu only). out may alias in.
void unary(UnaryOp op, DType type, const void* in, float scalar, void* out, int64_t n,
           cudaStream_t stream);
/// out: (n) = in: (n) + scalar, int64. out may alias in.
void add_scalar_int64(const int64_t* in, int64_t scalar, int64_t* out, int64_t n,
                      cudaStream_t stream);

/// out: (n) = op(a, b), a and b of `type`: float32 (out float32), int64 (Equal only; out
/// float32) or bfloat16 (Add, AddRelu, ReluBackward; out bfloat16). out may alias a when a is
/// not broadcast.
void binary(BinaryOp op, DType type, const void* a, const void* b, const BroadcastLayout& layout,
            void* out, int64_t n, cudaStream_t stream);

/// y: (N, K, PQ) of y_type (float32 or bfloat16) += bias: (K) float32
void add_channel_bias(void* y, DType y_type, const float* bias, int64_t n, int64_t k, int64_t pq,
                      cudaStream_t stream);

/// One torch.optim.SGD step over param, grad, momentum_buffer: (n); momentum_buffer is null when
/// momentum is 0.
void sgd_step(float* param, const float* grad, float* momentum_buffer, int64_t n,
              const SgdParams& params, cudaStream_t stream);
/// sgd_step() over `count` tensors, one launch per chunk of tensors rather than per tensor
/// (Note [Multi-tensor SGD] in kernels/sgd.h).
void sgd_step_multi(const SgdTensorPointers* tensors, int64_t count, const SgdParams& params,
                    cudaStream_t stream);

// --- reduce.cu

/// out: (outputs) = the sums, accumulated in double; workspace as sum_workspace_bytes()
/// (kernels/sum_plan.h) says. in → out: float32 → float32, bfloat16 → bfloat16, or
/// bfloat16 → float32 (a bias gradient from bfloat16 activations).
void sum(const void* in, DType in_type, const ReduceLayout& layout, int sm_count, void* workspace,
         void* out, DType out_type, cudaStream_t stream);
/// in: (rows, cols) → out: (rows) int64, the index of the first maximum of each row.
void argmax_rows(const float* in, int64_t rows, int64_t cols, int64_t* out, cudaStream_t stream);

// --- loss.cu

/// x: (rows, cols) → y: (rows, cols) = x - max - log(sum(exp(x - max))) per row.
void log_softmax_forward(const float* x, int64_t rows, int64_t cols, float* y, cudaStream_t stream);
/// grad_x: (rows, cols) = grad_y - exp(y) * sum(grad_y) per row.
void log_softmax_backward(const float* grad_y, const float* y, int64_t rows, int64_t cols,
                          float* grad_x, cudaStream_t stream);
/// logits: (rows, cols), labels: (rows) → log_probs: (rows, cols), loss: () the mean negative
/// log-likelihood. row_loss: (rows) scratch. bad_row: () int32 that the caller sets to INT32_MAX;
/// it becomes the smallest row whose label is outside [0, cols) (the loss is then NaN).
void cross_entropy_forward(const float* logits, const int64_t* labels, int64_t rows, int64_t cols,
                           float* log_probs, float* row_loss, int* bad_row, float* loss,
                           cudaStream_t stream);
/// grad_loss: () → grad_logits: (rows, cols) = grad_loss * (softmax - onehot(labels)) / rows.
void cross_entropy_backward(const float* grad_loss, const float* log_probs, const int64_t* labels,
                            int64_t rows, int64_t cols, float* grad_logits, cudaStream_t stream);

// --- batch_norm.cu: x, y and their gradients of `type` (float32 or bfloat16); gamma, beta,
// statistics and their gradients float32. Shape (N, C, HW). The training kernels take the plan
// of plan_norm (kernels/norm_plan.h), its pack from norm_pack over the call's activations, and
// `workspace`: norm_workspace_floats(plan, C) floats of device scratch.

/// y = gamma * (x - mean) * inv_std + beta with the batch's statistics, then max(y, 0) when
/// `relu`; save_mean, save_inv_std: (C) the batch mean and 1 / sqrt(var + eps), var biased;
/// `running`'s statistics, when given, move towards the batch's (Note [Running statistics] in
/// engine/running_statistics.h). Three kernels (Note [Batch-norm kernels] in
/// kernels/batch_norm.h).
void batch_norm_forward_training(DType type, const void* x, const NormShape& s,
                                 const NormPlan& plan, const float* gamma, const float* beta,
                                 float eps, bool relu, const RunningStatisticsPointers& running,
                                 void* y, float* save_mean, float* save_inv_std, float* workspace,
                                 cudaStream_t stream);
/// y = gamma * (x - running_mean) / sqrt(running_var + eps) + beta; `pack` from norm_pack;
/// inv_std: (C) device scratch. Two kernels: the factor per channel, then the full grid.
void batch_norm_forward_inference(DType type, const void* x, const NormShape& s, int pack,
                                  const float* gamma, const float* beta, const float* running_mean,
                                  const float* running_var, float eps, float* inv_std, void* y,
                                  cudaStream_t stream);
/// The gradients of batch_norm_forward_training from its saved statistics; y is the fused
/// ReLU's output (grad_y counts only where y > 0), or null for batch norm alone. Three kernels.
void batch_norm_backward(DType type, const void* grad_y, const void* y, const void* x,
                         const NormShape& s, const NormPlan& plan, const float* gamma,
                         const float* save_mean, const float* save_inv_std, void* grad_x,
                         float* grad_gamma, float* grad_beta, float* workspace,
                         cudaStream_t stream);

// --- pool.cu: x, y and their gradients of `type`, float32 or bfloat16

/// x: (N, C, H, W) → y: (N, C, P, Q) and argmax: (N, C, P, Q), the index of each window's first
/// maximum in its H×W plane (padding never wins).
void max_pool2d_forward(DType type, const void* x, const PoolShape& shape, void* y, int32_t* argmax,
                        cudaStream_t stream);
/// grad_y: (N, C, P, Q), argmax: (N, C, P, Q) → grad_x: (N, C, H, W), gathered per input
/// element (deterministic, no atomics).
void max_pool2d_backward(DType type, const void* grad_y, const int32_t* argmax,
                         const PoolShape& shape, void* grad_x, cudaStream_t stream);
/// x: (N, C, H, W) → y: (N, C, P, Q) with torch.nn.AdaptiveAvgPool2d's bins.
void adaptive_avg_pool2d_forward(DType type, const void* x, const PoolShape& shape, void* y,
                                 cudaStream_t stream);
/// grad_y: (N, C, P, Q) → grad_x: (N, C, H, W), gathered per input element.
void adaptive_avg_pool2d_backward(DType type, const void* grad_y, const PoolShape& shape,
                                  void* grad_x, cudaStream_t stream);

}  // namespace tandem::cuda::kernels
