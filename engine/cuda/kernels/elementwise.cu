// Elementwise kernels: unary ops, broadcasting binary ops, the conv bias add and the fused SGD
// update (one tensor or many per launch). Their bodies are in kernels/elementwise.h and
// kernels/sgd.h (Note [Kernel bodies] in kernels/grid.h).

#include "engine/cuda/kernels/elementwise.h"
#include "engine/cuda/kernels/launch.cuh"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/kernels/sgd.h"

namespace tandem::cuda::kernels {
namespace {

// Grid: chunk.first_block[chunk.count] blocks of kThreads (Note [Multi-tensor SGD]).
__global__ void sgd_step_multi_kernel(SgdChunk chunk, SgdParams o) {
  sgd_multi_block(chunk, o, static_cast<int>(blockIdx.x), threadIdx.x, blockDim.x);
}

template <UnaryOp kOp, typename T>
void launch_unary(const void* in, float scalar, void* out, int64_t n, cudaStream_t stream) {
  launch_grid_stride(UnaryBody<kOp, T>{static_cast<const T*>(in), scalar, static_cast<T*>(out), n},
                     stream);
}

template <BinaryOp kOp, typename T>
void launch_binary(const void* a, const void* b, const BroadcastLayout& layout, void* out,
                   int64_t n, cudaStream_t stream) {
  using Out = typename BinaryOut<T>::type;
  const auto* pa = static_cast<const T*>(a);
  const auto* pb = static_cast<const T*>(b);
  auto* pout = static_cast<Out*>(out);
  const bool contiguous = layout.rank == 1 && layout.a_stride[0] == 1 && layout.b_stride[0] == 1;
  if (contiguous) {
    launch_grid_stride(BinaryContiguousBody<kOp, T>{pa, pb, pout, n}, stream);
  } else {
    launch_grid_stride(BinaryBroadcastBody<kOp, T>{pa, pb, layout, pout, n}, stream);
  }
}

// The bfloat16 ops of Note [bfloat16 activations]; the others are float32 only.
void binary_bfloat16(BinaryOp op, const void* a, const void* b, const BroadcastLayout& layout,
                     void* out, int64_t n, cudaStream_t stream) {
  switch (op) {
    case BinaryOp::Add: return launch_binary<BinaryOp::Add, BFloat16>(a, b, layout, out, n, stream);
    case BinaryOp::AddRelu:
      return launch_binary<BinaryOp::AddRelu, BFloat16>(a, b, layout, out, n, stream);
    case BinaryOp::ReluBackward:
      return launch_binary<BinaryOp::ReluBackward, BFloat16>(a, b, layout, out, n, stream);
    default:
      TANDEM_FAIL("[binary] the CUDA backend has no bfloat16 kernel for binary op ",
                  static_cast<int>(op), " (bfloat16: add, add_relu, relu_backward)");
  }
}

}  // namespace

void unary(UnaryOp op, DType type, const void* in, float scalar, void* out, int64_t n,
           cudaStream_t stream) {
  if (n == 0) return;
  if (type == DType::BFloat16) {
    TANDEM_CHECK(op == UnaryOp::Relu,
                 "[unary] the CUDA backend has no bfloat16 kernel for unary op ",
                 static_cast<int>(op), " (bfloat16: relu)");
    launch_unary<UnaryOp::Relu, BFloat16>(in, scalar, out, n, stream);
    CUDA_CHECK_LAUNCH();
    return;
  }
  TANDEM_CHECK(type == DType::Float32, "[unary] takes float32 or bfloat16");
  switch (op) {
    case UnaryOp::Neg: launch_unary<UnaryOp::Neg, float>(in, scalar, out, n, stream); break;
    case UnaryOp::Relu: launch_unary<UnaryOp::Relu, float>(in, scalar, out, n, stream); break;
    case UnaryOp::Exp: launch_unary<UnaryOp::Exp, float>(in, scalar, out, n, stream); break;
    case UnaryOp::Log: launch_unary<UnaryOp::Log, float>(in, scalar, out, n, stream); break;
    case UnaryOp::Sqrt: launch_unary<UnaryOp::Sqrt, float>(in, scalar, out, n, stream); break;
    case UnaryOp::AddScalar:
      launch_unary<UnaryOp::AddScalar, float>(in, scalar, out, n, stream);
      break;
    case UnaryOp::MulScalar:
      launch_unary<UnaryOp::MulScalar, float>(in, scalar, out, n, stream);
      break;
    case UnaryOp::PowScalar:
      launch_unary<UnaryOp::PowScalar, float>(in, scalar, out, n, stream);
      break;
  }
  CUDA_CHECK_LAUNCH();
}

void add_scalar_int64(const int64_t* in, int64_t scalar, int64_t* out, int64_t n,
                      cudaStream_t stream) {
  if (n == 0) return;
  launch_grid_stride(AddScalarInt64Body{in, scalar, out, n}, stream);
  CUDA_CHECK_LAUNCH();
}

void binary(BinaryOp op, DType type, const void* a, const void* b, const BroadcastLayout& layout,
            void* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (type == DType::BFloat16) {
    binary_bfloat16(op, a, b, layout, out, n, stream);
    CUDA_CHECK_LAUNCH();
    return;
  }
  const bool int64_inputs = type == DType::Int64;
  TANDEM_CHECK(type == DType::Float32 || (int64_inputs && op == BinaryOp::Equal),
               "[binary] takes float32 or bfloat16 (or int64 for equal)");
  switch (op) {
    case BinaryOp::Add: launch_binary<BinaryOp::Add, float>(a, b, layout, out, n, stream); break;
    case BinaryOp::Sub: launch_binary<BinaryOp::Sub, float>(a, b, layout, out, n, stream); break;
    case BinaryOp::Mul: launch_binary<BinaryOp::Mul, float>(a, b, layout, out, n, stream); break;
    case BinaryOp::Div: launch_binary<BinaryOp::Div, float>(a, b, layout, out, n, stream); break;
    case BinaryOp::ReluBackward:
      launch_binary<BinaryOp::ReluBackward, float>(a, b, layout, out, n, stream);
      break;
    case BinaryOp::AddRelu:
      launch_binary<BinaryOp::AddRelu, float>(a, b, layout, out, n, stream);
      break;
    case BinaryOp::Equal:
      if (int64_inputs) {
        launch_binary<BinaryOp::Equal, int64_t>(a, b, layout, out, n, stream);
      } else {
        launch_binary<BinaryOp::Equal, float>(a, b, layout, out, n, stream);
      }
      break;
  }
  CUDA_CHECK_LAUNCH();
}

void add_channel_bias(void* y, DType y_type, const float* bias, int64_t n, int64_t k, int64_t pq,
                      cudaStream_t stream) {
  const int64_t total = n * k * pq;
  if (total == 0) return;
  if (y_type == DType::BFloat16) {
    launch_grid_stride(AddChannelBiasBody<BFloat16>{static_cast<BFloat16*>(y), bias, k, pq, total},
                       stream);
  } else {
    TANDEM_CHECK(y_type == DType::Float32, "[conv2d] bias add takes float32 or bfloat16");
    launch_grid_stride(AddChannelBiasBody<float>{static_cast<float*>(y), bias, k, pq, total},
                       stream);
  }
  CUDA_CHECK_LAUNCH();
}

void sgd_step(float* param, const float* grad, float* momentum_buffer, int64_t n,
              const SgdParams& params, cudaStream_t stream) {
  if (n == 0) return;
  launch_grid_stride(SgdBody{param, grad, momentum_buffer, params, n}, stream);
  CUDA_CHECK_LAUNCH();
}

void sgd_step_multi(const SgdTensorPointers* tensors, int64_t count, const SgdParams& params,
                    cudaStream_t stream) {
  for_each_sgd_chunk(tensors, count, [&](const SgdChunk& chunk, int64_t blocks) {
    sgd_step_multi_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(chunk, params);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tandem::cuda::kernels
