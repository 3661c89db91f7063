// Elementwise kernels: unary ops, broadcasting binary ops, the conv bias add, the fused SGD
// update (one tensor or many per launch) and the batch-norm statistic conversions. One template
// instance per op, so the op is a compile-time constant inside each kernel.

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
    if constexpr (kOp == Binary::AddRelu) return fmaxf(x + y, 0.0f);
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

// Element i of one torch.optim.SGD step, shared by the single- and multi-tensor kernels; the
// same arithmetic as the CPU kernel, in the same order. buffer is null when momentum is 0.
__device__ __forceinline__ void sgd_update(float* param, const float* grad, float* buffer,
                                           int64_t i, const SgdParams& o) {
  float d = grad[i] + o.weight_decay * param[i];
  if (buffer != nullptr) {
    buffer[i] = o.first_step ? d : o.momentum * buffer[i] + (1.0f - o.dampening) * d;
    d = o.nesterov ? d + o.momentum * buffer[i] : buffer[i];
  }
  param[i] -= o.lr * d;
}

// param, grad, momentum_buffer: (n)
__global__ void sgd_step_kernel(float* param, const float* grad, float* buffer, int64_t n,
                                SgdParams o) {
  TANDEM_GRID_STRIDE_LOOP(i, n) {
    sgd_update(param, grad, buffer, i, o);
  }
}

// Note [Multi-tensor SGD]
// A ResNet-20 step updates ~65 parameters, most of them a few hundred to a few thousand
// elements: one launch per parameter costs more in launch latency than the update itself. As
// PyTorch's multi_tensor_apply does, one launch updates a chunk of tensors whose pointers and
// sizes travel by value in the kernel arguments (no device allocation, no host-to-device copy):
// up to kSgdTensorsPerLaunch tensors, as many as keep the arguments under the 4 KB that every
// CUDA version accepts. The grid is flat over (tensor, range of kSgdBlockElements elements):
// tensor t owns blocks [first_block[t], first_block[t + 1]) and each block finds its tensor by
// a binary search over first_block, so a block never straddles two tensors and a large tensor
// simply gets many blocks. Longer lists take several launches.
constexpr int kSgdTensorsPerLaunch = 48;
constexpr int64_t kSgdBlockElements = 16 * kThreads;
// Keeps block indices in int; a chunk that would pass it is launched first.
constexpr int64_t kSgdMaxBlocksPerLaunch = int64_t{1} << 30;

struct SgdChunk {
  float* param[kSgdTensorsPerLaunch];
  const float* grad[kSgdTensorsPerLaunch];
  float* buffer[kSgdTensorsPerLaunch];  // null when momentum is 0
  int64_t n[kSgdTensorsPerLaunch];
  int first_block[kSgdTensorsPerLaunch + 1];  // first_block[count] = the grid size
  int count;
};
static_assert(sizeof(SgdChunk) + sizeof(SgdParams) <= 4096, "kernel arguments over 4 KB");

// Grid: chunk.first_block[chunk.count] blocks of kThreads (Note [Multi-tensor SGD]).
__global__ void sgd_step_multi_kernel(SgdChunk chunk, SgdParams o) {
  const int block = static_cast<int>(blockIdx.x);
  int lo = 0, hi = chunk.count - 1;  // the last tensor whose first block is <= block
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (chunk.first_block[mid] <= block) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int t = lo;
  const int64_t begin = static_cast<int64_t>(block - chunk.first_block[t]) * kSgdBlockElements;
  const int64_t end = min_of(begin + kSgdBlockElements, chunk.n[t]);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    sgd_update(chunk.param[t], chunk.grad[t], chunk.buffer[t], i, o);
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
    case Binary::AddRelu:
      launch_binary<Binary::AddRelu, float>(a, b, layout, out, n, stream);
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

void sgd_step_multi(const SgdTensorPointers* tensors, int64_t count, const SgdParams& params,
                    cudaStream_t stream) {
  SgdChunk chunk{};
  int64_t blocks = 0;
  auto launch = [&] {
    if (chunk.count == 0) return;
    chunk.first_block[chunk.count] = static_cast<int>(blocks);
    sgd_step_multi_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(chunk, params);
    CUDA_CHECK_LAUNCH();
    chunk.count = 0;
    blocks = 0;
  };
  for (int64_t i = 0; i < count; ++i) {
    const SgdTensorPointers& t = tensors[i];
    if (t.n == 0) continue;
    const int64_t tensor_blocks = (t.n + kSgdBlockElements - 1) / kSgdBlockElements;
    TANDEM_CHECK(tensor_blocks <= kSgdMaxBlocksPerLaunch, "[sgd_step_multi] tensor ", i,
                 " has too many elements (", t.n, ")");
    if (chunk.count == kSgdTensorsPerLaunch || blocks + tensor_blocks > kSgdMaxBlocksPerLaunch) {
      launch();
    }
    chunk.param[chunk.count] = t.param;
    chunk.grad[chunk.count] = t.grad;
    chunk.buffer[chunk.count] = t.momentum_buffer;
    chunk.n[chunk.count] = t.n;
    chunk.first_block[chunk.count] = static_cast<int>(blocks);
    ++chunk.count;
    blocks += tensor_blocks;
  }
  launch();
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
