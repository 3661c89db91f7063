// One SGD step (momentum 0.9, weight decay 5e-4) over every parameter of a CIFAR ResNet, either
// one sgd_step per parameter or one sgd_step_multi for all of them, on the CPU and on cuda:0.
//
//   ./build/microbench/bench_sgd [--benchmark_filter=cuda]
//
// Times are wall-clock per step, synchronised with the device after each step, so they include
// the host's launch overhead: the cost that the fused update removes (ResNet-20 has 65 mostly
// small parameters, so one launch per parameter is dominated by launch latency). "GB/s" counts
// the 20 bytes per element that the update must move (read param, grad, buffer; write param,
// buffer). CUDA cases are skipped, with the reason, where there is no CUDA device.

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/tandem.h"
#include "nn/resnet.h"

namespace {

using namespace tandem;

void BM_SgdStep(benchmark::State& state, const std::string& arch, bool on_cuda, bool fused) {
  if (on_cuda && !cuda_available()) {
    state.SkipWithError(cuda_unavailable_reason().c_str());
    return;
  }
  const Device device = on_cuda ? Device::cuda(0) : Device::cpu();
  Generator generator(0);
  const auto model = nn::make_resnet(arch, generator);
  std::vector<SgdTensors> tensors;
  int64_t elements = 0;
  for (const Tensor& p : model->parameters()) {
    tensors.push_back({p.detach().to(device).clone(), randn(p.shape(), generator).to(device),
                       zeros(p.shape(), {.device = device})});
    elements += p.numel();
  }
  SgdStepOptions options{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f};
  const auto step = [&] {
    if (fused) {
      sgd_step_multi(tensors, options);
    } else {
      for (SgdTensors& t : tensors) sgd_step(t.param, t.grad, t.momentum_buffer, options);
    }
  };
  DeviceRuntime& runtime = runtime_for(device);
  options.first_step = true;
  step();  // warm-up: the first step initialises the buffers
  options.first_step = false;
  runtime.synchronize(device);
  for (auto _ : state) {
    step();
    runtime.synchronize(device);
  }
  state.counters["parameters"] = static_cast<double>(tensors.size());
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(elements) * 20.0 * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

// resnet20|resnet18 / cpu|cuda / per_tensor|fused
[[maybe_unused]] const bool kRegistered = [] {
  for (const std::string arch : {"resnet20", "resnet18"}) {
    for (const bool on_cuda : {false, true}) {
      for (const bool fused : {false, true}) {
        const std::string name =
            arch + (on_cuda ? "/cuda" : "/cpu") + (fused ? "/fused" : "/per_tensor");
        benchmark::RegisterBenchmark(name.c_str(), BM_SgdStep, arch, on_cuda, fused)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
