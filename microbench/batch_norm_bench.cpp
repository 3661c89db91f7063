// A ResNet block's end on the CPU backend, channels-last, at ResNet-20's three stage shapes (batch
// 128), float32 and bfloat16: batch norm, then add + ReLU, forward and backward as separate
// kernels (batch_norm_forward_training + AddRelu; ReluBackward + batch_norm_backward) against the
// fused ones of batch_norm2d_add_relu (batch_norm_relu_forward_training and
// batch_norm_relu_backward with a residual), the kernels the profile's rows time.
//
//   ./build/microbench/bench_batch_norm --benchmark_repetitions=30
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
//
// On a shared machine read the "min" rows (the run least disturbed), as Note [Channels-last batch
// norm] does.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/tandem.h"

namespace {

using namespace tandem;

constexpr MemoryFormat kNhwc = MemoryFormat::ChannelsLast;

Tensor activation(const Shape& shape, DType dtype, uint64_t seed) {
  Generator generator(seed);
  return randn(shape, generator).to(dtype).contiguous(kNhwc);
}

// The operands of one block's end: x (conv2's output), the shortcut, the incoming gradient and
// every output, allocated once.
struct BlockEnd {
  BlockEnd(const Shape& shape, DType dtype)
      : x(activation(shape, dtype, 1)),
        residual(activation(shape, dtype, 2)),
        grad_y(activation(shape, dtype, 3)),
        gamma(ones({shape[1]})),
        beta(zeros({shape[1]})),
        y(empty_like(x)),
        normalised(empty_like(x)),
        masked(empty_like(x)),
        grad_x(empty_like(x)),
        mean(empty({shape[1]})),
        var(empty({shape[1]})),
        grad_gamma(empty({shape[1]})),
        grad_beta(empty({shape[1]})) {}
  Tensor x, residual, grad_y, gamma, beta, y, normalised, masked, grad_x, mean, var, grad_gamma,
      grad_beta;
};

void separate(Backend& cpu, BlockEnd& b) {
  cpu.batch_norm_forward_training(b.x, b.gamma, b.beta, {}, 1e-5f, b.normalised, b.mean, b.var);
  cpu.binary(BinaryOp::AddRelu, b.normalised, b.residual, b.y);
  cpu.binary(BinaryOp::ReluBackward, b.grad_y, b.y, b.masked);
  cpu.batch_norm_backward(b.masked, b.x, b.gamma, b.mean, b.var, 1e-5f, b.grad_x, b.grad_gamma,
                          b.grad_beta);
}

void fused(Backend& cpu, BlockEnd& b) {
  cpu.batch_norm_relu_forward_training(b.x, b.residual, b.gamma, b.beta, {}, 1e-5f, b.y, b.mean,
                                       b.var);
  cpu.batch_norm_relu_backward(b.grad_y, b.y, b.x, b.gamma, b.mean, b.var, 1e-5f, b.grad_x,
                               b.grad_gamma, b.grad_beta, b.masked);
}

void BM_BlockEnd(benchmark::State& state, DType dtype, bool is_fused) {
  const Shape shape = {128, state.range(0), state.range(1), state.range(1)};
  BlockEnd block(shape, dtype);
  Backend& cpu = backend_for(Device::cpu());
  for (auto _ : state) is_fused ? fused(cpu, block) : separate(cpu, block);
}

double minimum(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}

void stage_shapes(benchmark::internal::Benchmark* b) {
  b->Args({16, 32})->Args({32, 16})->Args({64, 8});
  b->ComputeStatistics("min", minimum)->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(BM_BlockEnd, float32_separate, DType::Float32, false)->Apply(stage_shapes);
BENCHMARK_CAPTURE(BM_BlockEnd, float32_fused, DType::Float32, true)->Apply(stage_shapes);
BENCHMARK_CAPTURE(BM_BlockEnd, bfloat16_separate, DType::BFloat16, false)->Apply(stage_shapes);
BENCHMARK_CAPTURE(BM_BlockEnd, bfloat16_fused, DType::BFloat16, true)->Apply(stage_shapes);

}  // namespace

BENCHMARK_MAIN();
