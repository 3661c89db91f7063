// The activation kernels of the CPU backend at a ResNet-20 activation's size (128 images of
// 16 x 32 x 32): ReLU, add + ReLU (a residual join), ReLU's backward, and 2 x 2 max pooling
// forward and backward, in float32 and bfloat16, NCHW. For checking that the NaN-propagating
// forms (Note [NaN through ReLU and max pooling] in engine/cpu/elementwise.cpp) still vectorise.
//
//   ./build/microbench/bench_elementwise [--benchmark_filter=Relu]
//
// "GB/s" counts the bytes each kernel must move: one read and one write per element for ReLU,
// two reads and one write for the binary ops, the full-size side of max pooling.

#include <benchmark/benchmark.h>

#include "engine/backend/backend.h"
#include "engine/tandem.h"

namespace {

using namespace tandem;

const Shape kActivation = {128, 16, 32, 32};

Tensor activation(DType dtype, uint64_t seed) {
  Generator generator(seed);
  return randn(kActivation, generator).to(dtype);
}

void set_bytes(benchmark::State& state, const Tensor& t, int accesses) {
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(t.nbytes()) * accesses * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Relu(benchmark::State& state, DType dtype) {
  const Tensor in = activation(dtype, 1);
  Tensor out = empty_like(in);
  for (auto _ : state) backend_for(in.device()).unary(UnaryOp::Relu, in, 0.0f, out);
  set_bytes(state, in, 2);
}

void BM_Binary(benchmark::State& state, BinaryOp op, DType dtype) {
  const Tensor a = activation(dtype, 2), b = activation(dtype, 3);
  Tensor out = empty_like(a);
  for (auto _ : state) backend_for(a.device()).binary(op, a, b, out);
  set_bytes(state, a, 3);
}

void BM_MaxPool(benchmark::State& state, DType dtype, bool backward) {
  const Tensor x = activation(dtype, 4);
  const Pool2dOptions options{.kernel_size = 2, .stride = 2};
  Tensor y = empty({kActivation[0], kActivation[1], 16, 16}, {.dtype = dtype});
  Tensor workspace;
  Backend& cpu = backend_for(x.device());
  cpu.max_pool2d_forward(x, options, y, workspace);
  Tensor grad_x = empty_like(x);
  const Tensor grad_y = ones(y.shape(), {.dtype = dtype});
  for (auto _ : state) {
    if (backward) {
      cpu.max_pool2d_backward(grad_y, x, y, workspace, options, grad_x);
    } else {
      cpu.max_pool2d_forward(x, options, y, workspace);
    }
  }
  set_bytes(state, x, 1);  // x read (forward) or grad_x written (backward), the larger side
}

BENCHMARK_CAPTURE(BM_Relu, float32, DType::Float32)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Relu, bfloat16, DType::BFloat16)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Binary, AddRelu_float32, BinaryOp::AddRelu, DType::Float32)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Binary, AddRelu_bfloat16, BinaryOp::AddRelu, DType::BFloat16)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Binary, ReluBackward_float32, BinaryOp::ReluBackward, DType::Float32)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Binary, ReluBackward_bfloat16, BinaryOp::ReluBackward, DType::BFloat16)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MaxPool, forward_float32, DType::Float32, false)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MaxPool, backward_float32, DType::Float32, true)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
