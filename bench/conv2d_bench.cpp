// conv2d forward and forward+backward (data and weights) at the ResNet-20
// shapes: N = 128, 3x3 kernels, stride 1, padding 1; 16, 32 and 64 channels at
// 32, 16 and 8 pixels. Reports GFLOP/s (forward = 2·N·K·C·R·S·P·Q FLOPs,
// forward+backward = 3×).
//
//   ./build/bench/bench_conv2d [--benchmark_filter=...]

#include <benchmark/benchmark.h>

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
  for (auto _ : state) {
    Tensor y = conv2d(s.x, s.w, Tensor(), {.stride = 1, .padding = 1});
    benchmark::DoNotOptimize(y.data_ptr());
  }
  report(state, s.forward_flops);
}

void BM_Conv2dForwardBackward(benchmark::State& state) {
  Setup s = make_setup(state.range(0), state.range(1));
  s.x.set_requires_grad(true);  // as inside a network: both backward kernels run
  for (auto _ : state) {
    Tensor y = conv2d(s.x, s.w, Tensor(), {.stride = 1, .padding = 1});
    y.backward(ones(y.shape()));
    s.x.set_grad(Tensor());
    s.w.set_grad(Tensor());
  }
  report(state, 3.0 * s.forward_flops);
}

// {channels, pixels}: the three stages of ResNet-20.
#define RESNET20_SHAPES Args({16, 32})->Args({32, 16})->Args({64, 8})

BENCHMARK(BM_Conv2dForward)
    ->RESNET20_SHAPES->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);
BENCHMARK(BM_Conv2dForwardBackward)
    ->RESNET20_SHAPES->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);

}  // namespace

BENCHMARK_MAIN();
