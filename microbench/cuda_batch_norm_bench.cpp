// CUDA: training batch norm (forward, and forward + backward) at the CIFAR ResNet shapes (batch
// 128), float32 through cuDNN against bfloat16 through Tandem's own kernels (Note [Batch-norm
// kernels]), each with and without the ReLU that follows it in a ResNet (fused into the own
// kernels; a separate op after cuDNN). Running statistics are kept, as in training.
//
//   ./build/microbench/bench_cuda_batch_norm [--benchmark_filter=...]
//
// Times are GPU times between CUDA events around each iteration (microbench/cuda_timing.h).
// "GB/s" counts the bytes the pass must move at the least, each once, in the activations' dtype:
// x read and y written forward; grad_y and x (and y with the ReLU) read and grad_x written
// backward. Set against the GPU's memory bandwidth (3.35 TB/s on an H100 SXM) it says how near
// a kernel runs to the memory's limit; float32 moves twice the bytes of bfloat16, so at equal
// GB/s bfloat16 takes half the time. The own kernels read x a second time for the two-pass
// statistics, over one chunk at a time, which the L2 cache mostly serves.
//
// Without a CUDA device it says so and exits 0.

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#include "engine/cuda/runtime/device.h"
#include "engine/tandem.h"
#include "microbench/cuda_timing.h"

namespace {

using namespace tandem;

constexpr int64_t kBatch = 128;
const Device kGpu = Device::cuda(0);

struct Setup {
  Tensor x, grad_y, gamma, beta, running_mean, running_var;
  BatchNormOptions options;
  double values = 0;  // of x
  DType dtype = DType::Float32;
};

// {channels, pixels, bfloat16, relu}
Setup make_setup(benchmark::State& state, bool requires_grad) {
  const int64_t channels = state.range(0), pixels = state.range(1);
  const DType dtype = state.range(2) != 0 ? DType::BFloat16 : DType::Float32;
  const bool relu = state.range(3) != 0;
  state.SetLabel(std::string(dtype == DType::BFloat16 ? "bf16 own kernels" : "fp32 cuDNN") +
                 (relu ? " + relu" : ""));
  Generator generator(0);
  const Shape shape{kBatch, channels, pixels, pixels};
  Setup s{randn(shape, generator, {.device = kGpu}).to(dtype),
          randn(shape, generator, {.device = kGpu}).to(dtype),
          ones({channels}, {.device = kGpu}),
          zeros({channels}, {.device = kGpu}),
          zeros({channels}, {.device = kGpu}),
          ones({channels}, {.device = kGpu}),
          {.training = true, .fuse_relu = relu},
          static_cast<double>(kBatch * channels * pixels * pixels),
          dtype};
  s.x.set_requires_grad(requires_grad);
  s.gamma.set_requires_grad(requires_grad);
  s.beta.set_requires_grad(requires_grad);
  return s;
}

void set_bandwidth(benchmark::State& state, const Setup& s, double tensors_moved) {
  const double bytes = tensors_moved * s.values * static_cast<double>(dtype_size(s.dtype));
  state.counters["GB/s"] =
      benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_CudaBatchNormForward(benchmark::State& state) {
  const Setup s = make_setup(state, false);
  NoGradGuard no_grad;
  microbench::time_on_gpu(state, [&] {
    benchmark::DoNotOptimize(
        batch_norm2d(s.x, s.gamma, s.beta, s.running_mean, s.running_var, s.options).data_ptr());
  });
  set_bandwidth(state, s, 2.0);
}

void BM_CudaBatchNormForwardBackward(benchmark::State& state) {
  Setup s = make_setup(state, true);
  microbench::time_on_gpu(state, [&] {
    batch_norm2d(s.x, s.gamma, s.beta, s.running_mean, s.running_var, s.options).backward(s.grad_y);
    for (Tensor* t : {&s.x, &s.gamma, &s.beta}) t->set_grad(Tensor());
  });
  set_bandwidth(state, s, s.options.fuse_relu ? 6.0 : 5.0);
}

// ResNet-20 stages {16, 32}, {32, 16}, {64, 8}; CIFAR ResNet-18 stages {64, 32} ... {512, 4}.
void norm_shapes(benchmark::internal::Benchmark* b) {
  constexpr int kShapes[][2] = {{16, 32},  {32, 16}, {64, 8}, {64, 32},
                                {128, 16}, {256, 8}, {512, 4}};
  for (const auto& shape : kShapes) {
    for (int bfloat16 : {0, 1}) {
      for (int relu : {0, 1}) b->Args({shape[0], shape[1], bfloat16, relu});
    }
  }
}

BENCHMARK(BM_CudaBatchNormForward)
    ->Apply(norm_shapes)
    ->ArgNames({"channels", "pixels", "bf16", "relu"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond)
    ->Iterations(100);
BENCHMARK(BM_CudaBatchNormForwardBackward)
    ->Apply(norm_shapes)
    ->ArgNames({"channels", "pixels", "bf16", "relu"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond)
    ->Iterations(50);

}  // namespace

int main(int argc, char** argv) {
  if (!cuda_available()) {
    std::printf("bench_cuda_batch_norm: %s; nothing to measure\n",
                cuda_unavailable_reason().c_str());
    return 0;
  }
  const cudaDeviceProp& p = cuda::device_properties(0);
  std::printf("bench_cuda_batch_norm on %s (sm_%d%d, %d SMs)\n", p.name, p.major, p.minor,
              p.multiProcessorCount);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
