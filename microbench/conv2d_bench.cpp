// conv2d forward and forward+backward (data and weights) at the ResNet-20
// shapes: N = 128, 3x3 kernels, stride 1, padding 1; 16, 32 and 64 channels at
// 32, 16 and 8 pixels. Reports GFLOP/s (forward = 2·N·K·C·R·S·P·Q FLOPs,
// forward+backward = 3×).
//
//   ./build/microbench/bench_conv2d [--benchmark_filter=...]

#include <benchmark/benchmark.h>
#include <malloc.h>

#include <cstdio>

#include "engine/tandem.h"

namespace {

using namespace tandem;

struct Setup {
  Tensor x, w;
  double forward_flops;
};

Setup make_setup(int64_t channels, int64_t pixels) {
  constexpr int64_t kBatch = 128;
  Generator generator(0);
  Setup s{randn({kBatch, channels, pixels, pixels}, generator),
          randn({channels, channels, 3, 3}, generator, {.requires_grad = true}), 0.0};
  s.forward_flops = 2.0 * kBatch * channels * channels * 9 * pixels * pixels;
  return s;
}

void report(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops_per_iteration * 1e-9 * state.iterations(),
                                                 benchmark::Counter::kIsRate);
}

void BM_Conv2dForward(benchmark::State& state) {
  const Setup s = make_setup(state.range(0), state.range(1));
  NoGradGuard no_grad;
  const auto step = [&] {
    Tensor y = conv2d(s.x, s.w, Tensor(), {.stride = 1, .padding = 1});
    benchmark::DoNotOptimize(y.data_ptr());
  };
  step();  // creates and caches the oneDNN primitives outside the timed loop
  for (auto _ : state) step();
  report(state, s.forward_flops);
}

void BM_Conv2dForwardBackward(benchmark::State& state) {
  Setup s = make_setup(state.range(0), state.range(1));
  s.x.set_requires_grad(true);  // as inside a network: both backward kernels run
  Generator generator(1);
  const Tensor grad_y = randn({s.x.size(0), s.w.size(0), s.x.size(2), s.x.size(3)}, generator);
  const auto step = [&] {
    conv2d(s.x, s.w, Tensor(), {.stride = 1, .padding = 1}).backward(grad_y);
    s.x.set_grad(Tensor());
    s.w.set_grad(Tensor());
  };
  step();  // creates and caches the oneDNN primitives outside the timed loop
  for (auto _ : state) step();
  report(state, 3.0 * s.forward_flops);
}

// {channels, pixels}: the three stages of ResNet-20. Fixed iteration counts keep the whole
// program around 10 s on 2 cores; the machines are shared and noisy, so each runs 3 times
// and the median is the figure to read.
#define RESNET20_SHAPES Args({16, 32})->Args({32, 16})->Args({64, 8})

BENCHMARK(BM_Conv2dForward)
    ->RESNET20_SHAPES->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(100)
    ->Repetitions(3);
BENCHMARK(BM_Conv2dForwardBackward)
    ->RESNET20_SHAPES->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(40)
    ->Repetitions(3);

}  // namespace

// Tandem's CPU allocator has no cache, and with glibc's default
// settings the 8 MB per-call buffers at 16 channels / 32x32 were returned to the OS and faulted
// back in on many calls (~4000 minor page faults per forward, 10 ms instead of 4.7 ms), at
// random across repetitions. This program measures the kernels, so it tells glibc to keep freed
// memory; a caching CPU allocator would make that unnecessary.
int main(int argc, char** argv) {
  // Blocks up to 32 MB (glibc's largest threshold) from the heap, not fresh mmaps, and no
  // trimming of the heap after frees.
  if (mallopt(M_MMAP_THRESHOLD, 32 << 20) != 1 || mallopt(M_TRIM_THRESHOLD, 1 << 30) != 1) {
    std::fprintf(stderr, "bench_conv2d: mallopt failed; timings will include page faults\n");
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
