// Elementwise kernels: unary ops, broadcasting binary ops, the conv bias add, the fused SGD
// update and the batch-norm statistic conversions. One template instance per op, so the op is
// a compile-time constant inside each kernel.

#include "engine/cuda/kernels.h"
#include "engine/cuda/launch.cuh"

namespace tandem::cuda::kernels {
namespace {

template <Unary kOp>
__device__ __forceinline__ float apply_unary(float v, float s) {
  if constexpr (kOp == Unary::Neg) return -v;
  if constexpr (kOp == Unary::Relu) return v > 0.0f ? v : 0.0f;
  if constexpr (kOp == Unary::Exp) return expf(v);
  if constexpr (kOp == Unary::Log) return logf(v);
  if constexpr (kOp == Unary::Sqrt) return sqrtf(v);
  if constexpr (kOp == Unary::AddScalar) return v + s;
  if constexpr (kOp == Unary::MulScalar) return v * s;
  if constexpr (kOp == Unary::PowScalar) return powf(v, s);
}

template <Binary kOp, typename T>
__device__ __forceinline__ float apply_binary(T x, T y) {
  if constexpr (kOp == Binary::Equal) {
    return x == y ? 1.0f : 0.0f;
  } else {
    if constexpr (kOp == Binary::Add) return x + y;
    if constexpr (kOp == Binary::Sub) return x - y;
    if constexpr (kOp == Binary::Mul) return x * y;
    if constexpr (kOp == Binary::Div) return x / y;
    if constexpr (kOp == Binary::ReluBackward) return y > 0.0f ? x : 0.0f;  // x: grad, y: output
  }
}

// in, out: (n)
template <Unary kOp>
__global__ void unary_kernel(const float* in, float scalar, float* out, int64_t n) {
  TANDEM_GRID_STRIDE_LOOP(i, n) {
    out[i] = apply_unary<kOp>(in[i], scalar);
  }
}

// a, b, out: (n), no broadcasting
template <Binary kOp, typename T>
__global__ void binary_contiguous_kernel(const T* a, const T* b, float* out, int64_t n) {
  TANDEM_GRID_STRIDE_LOOP(i, n) {
    out[i] = apply_binary<kOp, T>(a[i], b[i]);
  }
}

// out: (n) contiguous over layout.size; a and b read at their (broadcast) strides
template <Binary kOp, typename T>
__global__ void binary_broadcast_kernel(const T* a, const T* b, BroadcastLayout layout, float* out,
                                        int64_t n) {
  TANDEM_GRID_STRIDE_LOOP(i, n) {
    int64_t remaining = i;
    int64_t offset_a = 0;
    int64_t offset_b = 0;
    for (int d = layout.rank - 1; d >= 0; --d) {
      const int64_t index = remaining % layout.size[d];
      remaining /= layout.size[d];
      offset_a += index * layout.a_stride[d];
      offset_b += index * layout.b_stride[d];
    }
    out[i] = apply_binary<kOp, T>(a[offset_a], b[offset_b]);
  }
}

// y: (N, K, PQ) += bias: (K); n_total = N * K * PQ
__global__ void add_channel_bias_kernel(float* y, const float* bias, int64_t k, int64_t pq,
                                        int64_t n_total) {
  TANDEM_GRID_STRIDE_LOOP(i, n_total) {
    y[i] += bias[(i / pq) % k];
  }
}

// param, grad, momentum_buffer: (n); the same arithmetic as the CPU kernel, in the same order.
__global__ void sgd_step_kernel(float* param, const float* grad, float* buffer, int64_t n,
                                SgdParams o) {
  TANDEM_GRID_STRIDE_LOOP(i, n) {
    float d = grad[i] + o.weight_decay * param[i];
    if (buffer != nullptr) {
      buffer[i] = o.first_step ? d : o.momentum * buffer[i] + (1.0f - o.dampening) * d;
      d = o.nesterov ? d + o.momentum * buffer[i] : buffer[i];
    }
    param[i] -= o.lr * d;
  }
}

// inv_std, var: (C)
__global__ void inv_std_to_var_kernel(const float* inv_std, float eps, float* var, int64_t c) {
  TANDEM_GRID_STRIDE_LOOP(i, c) {
    // max(0, ·): rounding may push a zero variance a hair below 0.
    var[i] = fmaxf(1.0f / (inv_std[i] * inv_std[i]) - eps, 0.0f);
  }
}

__global__ void var_to_inv_std_kernel(const float* var, float eps, float* inv_std, int64_t c) {
  TANDEM_GRID_STRIDE_LOOP(i, c) {
    inv_std[i] = 1.0f / sqrtf(var[i] + eps);
  }
}

template <Unary kOp>
void launch_unary(const float* in, float scalar, float* out, int64_t n, cudaStream_t stream) {
  unary_kernel<kOp><<<blocks_for(n), kThreads, 0, stream>>>(in, scalar, out, n);
}

template <Binary kOp, typename T>
void launch_binary(const void* a, const void* b, const BroadcastLayout& layout, float* out,
                   int64_t n, cudaStream_t stream) {
  const auto* pa = static_cast<const T*>(a);
  const auto* pb = static_cast<const T*>(b);
  const bool contiguous = layout.rank == 1 && layout.a_stride[0] == 1 && layout.b_stride[0] == 1;
  if (contiguous) {
    binary_contiguous_kernel<kOp, T><<<blocks_for(n), kThreads, 0, stream>>>(pa, pb, out, n);
  } else {
    binary_broadcast_kernel<kOp, T><<<blocks_for(n), kThreads, 0, stream>>>(pa, pb, layout, out, n);
  }
}

}  // namespace

void unary(Unary op, const float* in, float scalar, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  switch (op) {
    case Unary::Neg: launch_unary<Unary::Neg>(in, scalar, out, n, stream); break;
    case Unary::Relu: launch_unary<Unary::Relu>(in, scalar, out, n, stream); break;
    case Unary::Exp: launch_unary<Unary::Exp>(in, scalar, out, n, stream); break;
    case Unary::Log: launch_unary<Unary::Log>(in, scalar, out, n, stream); break;
    case Unary::Sqrt: launch_unary<Unary::Sqrt>(in, scalar, out, n, stream); break;
    case Unary::AddScalar: launch_unary<Unary::AddScalar>(in, scalar, out, n, stream); break;
    case Unary::MulScalar: launch_unary<Unary::MulScalar>(in, scalar, out, n, stream); break;
    case Unary::PowScalar: launch_unary<Unary::PowScalar>(in, scalar, out, n, stream); break;
  }
  CUDA_CHECK_LAUNCH();
}

void binary(Binary op, const void* a, const void* b, bool int64_inputs,
            const BroadcastLayout& layout, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  TANDEM_CHECK(!int64_inputs || op == Binary::Equal, "[binary] int64 inputs only for equal");
  switch (op) {
    case Binary::Add: launch_binary<Binary::Add, float>(a, b, layout, out, n, stream); break;
    case Binary::Sub: launch_binary<Binary::Sub, float>(a, b, layout, out, n, stream); break;
    case Binary::Mul: launch_binary<Binary::Mul, float>(a, b, layout, out, n, stream); break;
    case Binary::Div: launch_binary<Binary::Div, float>(a, b, layout, out, n, stream); break;
    case Binary::ReluBackward:
      launch_binary<Binary::ReluBackward, float>(a, b, layout, out, n, stream);
      break;
    case Binary::Equal:
      if (int64_inputs) {
        launch_binary<Binary::Equal, int64_t>(a, b, layout, out, n, stream);
      } else {
        launch_binary<Binary::Equal, float>(a, b, layout, out, n, stream);
      }
      break;
  }
  CUDA_CHECK_LAUNCH();
}

void add_channel_bias(float* y, const float* bias, int64_t n, int64_t k, int64_t pq,
                      cudaStream_t stream) {
  const int64_t total = n * k * pq;
  if (total == 0) return;
  add_channel_bias_kernel<<<blocks_for(total), kThreads, 0, stream>>>(y, bias, k, pq, total);
  CUDA_CHECK_LAUNCH();
}

void sgd_step(float* param, const float* grad, float* momentum_buffer, int64_t n,
              const SgdParams& params, cudaStream_t stream) {
  if (n == 0) return;
  sgd_step_kernel<<<blocks_for(n), kThreads, 0, stream>>>(param, grad, momentum_buffer, n, params);
  CUDA_CHECK_LAUNCH();
}

void inv_std_to_var(const float* inv_std, float eps, float* var, int64_t c, cudaStream_t stream) {
  if (c == 0) return;
  inv_std_to_var_kernel<<<blocks_for(c), kThreads, 0, stream>>>(inv_std, eps, var, c);
  CUDA_CHECK_LAUNCH();
}

void var_to_inv_std(const float* var, float eps, float* inv_std, int64_t c, cudaStream_t stream) {
  if (c == 0) return;
  var_to_inv_std_kernel<<<blocks_for(c), kThreads, 0, stream>>>(var, eps, inv_std, c);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda::kernels
