// CUDA: conv2d forward and forward+backward (cuDNN) at the CIFAR ResNet-20 and ResNet-18 shapes,
// in full float32 and with TF32 tensor cores, plus the caching allocator's hit rate over
// ResNet-20 training steps.
//
//   ./build/microbench/bench_cuda_conv [--benchmark_filter=...]
//
// Times are GPU times between CUDA events around each iteration (manual time), so host-side
// launch overhead only shows where it starves the GPU. GFLOP/s counts 2·N·K·C·R·S·P·Q per
// forward and 3× that per forward+backward; "fp32_peak_%" is the share of the GPU's float32 (non
// tensor-core) peak, SMs × FP32 lanes × 2 × boost clock: 67 TFLOP/s on an H100 SXM. TF32 runs
// can exceed 100% of it: tensor cores are not counted in that peak.
//
// Without a CUDA device it says so and exits 0.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/tandem.h"
#include "microbench/cuda_timing.h"
#include "nn/resnet.h"
#include "nn/sgd.h"

namespace {

using namespace tandem;

constexpr int64_t kBatch = 128;
const Device kGpu = Device::cuda(0);

// FP32 FMA lanes per SM: 64 on A100 (8.0), 128 on 8.6, 8.9, 9.0 and later.
double fp32_peak_flops() {
  const cudaDeviceProp& p = cuda::device_properties(0);
  const int lanes = (p.major == 8 && p.minor == 0) ? 64 : 128;
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  return static_cast<double>(p.multiProcessorCount) * lanes * 2.0 * clock_khz * 1e3;
}

// Times `step` on the GPU (microbench/cuda_timing.h) and counts its floating-point work.
template <typename Step>
void run_timed(benchmark::State& state, double flops_per_iteration, Step step) {
  microbench::time_on_gpu(state, step);
  // Per-iteration values, multiplied by the iterations and divided by the (manual) time.
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops_per_iteration * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["fp32_peak_%"] =
      benchmark::Counter(100.0 * flops_per_iteration / fp32_peak_flops(),
                         benchmark::Counter::kIsIterationInvariantRate);
}

struct ConvSetup {
  Tensor x, w, grad_y;
  double forward_flops;
};

// {channels, pixels, tf32}: 3x3 kernels, stride 1, padding 1, as in the ResNets' main path.
ConvSetup make_setup(benchmark::State& state) {
  const int64_t channels = state.range(0), pixels = state.range(1);
  cuda::backend().set_allow_tf32(state.range(2) != 0);
  state.SetLabel(state.range(2) != 0 ? "tf32" : "fp32");
  Generator generator(0);
  ConvSetup s{randn({kBatch, channels, pixels, pixels}, generator, {.device = kGpu}),
              randn({channels, channels, 3, 3}, generator, {.device = kGpu}),
              randn({kBatch, channels, pixels, pixels}, generator, {.device = kGpu}), 0.0};
  s.forward_flops = 2.0 * kBatch * channels * channels * 9 * pixels * pixels;
  return s;
}

void BM_CudaConv2dForward(benchmark::State& state) {
  const ConvSetup s = make_setup(state);
  NoGradGuard no_grad;
  run_timed(state, s.forward_flops, [&] {
    benchmark::DoNotOptimize(conv2d(s.x, s.w, Tensor(), {.stride = 1, .padding = 1}).data_ptr());
  });
  cuda::backend().set_allow_tf32(false);
}

void BM_CudaConv2dForwardBackward(benchmark::State& state) {
  ConvSetup s = make_setup(state);
  s.x.set_requires_grad(true);
  s.w.set_requires_grad(true);
  run_timed(state, 3.0 * s.forward_flops, [&] {
    conv2d(s.x, s.w, Tensor(), {.stride = 1, .padding = 1}).backward(s.grad_y);
    s.x.set_grad(Tensor());
    s.w.set_grad(Tensor());
  });
  cuda::backend().set_allow_tf32(false);
}

// ResNet-20 stages {16, 32}, {32, 16}, {64, 8}; CIFAR ResNet-18 stages {64, 32} ... {512, 4}.
void conv_shapes(benchmark::internal::Benchmark* b) {
  constexpr int kShapes[][2] = {{16, 32},  {32, 16}, {64, 8}, {64, 32},
                                {128, 16}, {256, 8}, {512, 4}};
  for (int tf32 : {0, 1}) {
    for (const auto& shape : kShapes) b->Args({shape[0], shape[1], tf32});
  }
}

BENCHMARK(BM_CudaConv2dForward)
    ->Apply(conv_shapes)
    ->ArgNames({"channels", "pixels", "tf32"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond)
    ->Iterations(50);
BENCHMARK(BM_CudaConv2dForwardBackward)
    ->Apply(conv_shapes)
    ->ArgNames({"channels", "pixels", "tf32"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond)
    ->Iterations(20);

// Training steps of ResNet-20 (batch 128): the caching allocator's hits and misses after the
// first step, and whether any step after the first needed a new segment (cudaMalloc).
void BM_CudaAllocatorTrainingLoop(benchmark::State& state) {
  Generator generator(0);
  const auto model = nn::make_resnet("resnet20", generator);
  model->to(kGpu);
  nn::Sgd optimizer(model->parameters(), {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f});
  const Tensor images = randn({kBatch, 3, 32, 32}, generator, {.device = kGpu});
  std::vector<int64_t> label_values(kBatch);
  for (auto& label : label_values) label = static_cast<int64_t>(generator.next_u64() % 10);
  const Tensor labels =
      from_vector(label_values, {kBatch}, {.dtype = DType::Int64, .device = kGpu});
  const auto train_step = [&] {
    optimizer.zero_grad();
    cross_entropy((*model)(images), labels).backward();
    optimizer.step();
  };
  train_step();  // the first step fills the cache (and runs cuDNN's algorithm search)
  cuda::CachingAllocator& allocator = cuda::caching_allocator(0);
  const cuda::CachingAllocatorStats before = allocator.detailed_stats();
  for (auto _ : state) {
    train_step();
    runtime_for(kGpu).synchronize(kGpu);
  }
  const cuda::CachingAllocatorStats after = allocator.detailed_stats();
  const double hits = static_cast<double>(after.cache_hits - before.cache_hits);
  const double misses = static_cast<double>(after.cache_misses - before.cache_misses);
  state.counters["hit_rate_%"] = 100.0 * hits / std::max(1.0, hits + misses);
  state.counters["misses_after_step_1"] = misses;
  state.counters["allocs/step"] = (hits + misses) / static_cast<double>(state.iterations());
  state.counters["reserved_MiB"] = static_cast<double>(after.reserved_bytes) / (1 << 20);
  state.counters["peak_MiB"] = static_cast<double>(after.peak_allocated_bytes) / (1 << 20);
  state.counters["images/s"] = benchmark::Counter(static_cast<double>(kBatch) * state.iterations(),
                                                  benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CudaAllocatorTrainingLoop)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(20);

}  // namespace

int main(int argc, char** argv) {
  if (!cuda_available()) {
    std::printf("bench_cuda_conv: %s; nothing to measure\n", cuda_unavailable_reason().c_str());
    return 0;
  }
  const cudaDeviceProp& p = cuda::device_properties(0);
  std::printf("bench_cuda_conv on %s (sm_%d%d, %d SMs): float32 peak %.1f TFLOP/s\n", p.name,
              p.major, p.minor, p.multiProcessorCount, fp32_peak_flops() * 1e-12);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
