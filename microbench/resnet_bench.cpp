// One training step's forward + backward of the CIFAR ResNets on CPU, batch 128
// (32x32 images), in both memory formats, reported as ms per step and images/s.
//
//   ./build/microbench/bench_resnet [--benchmark_filter=resnet20/channels_last]

#include <benchmark/benchmark.h>

#include "engine/tandem.h"
#include "nn/resnet.h"

namespace {

using namespace tandem;

void BM_ResNetForwardBackward(benchmark::State& state, const std::string& arch,
                              MemoryFormat format) {
  constexpr int64_t kBatch = 128;
  Generator generator(0);
  const auto model = nn::make_resnet(arch, generator);
  model->to(format);
  const Tensor images = randn({kBatch, 3, 32, 32}, generator).contiguous(format);
  std::vector<int64_t> label_values(kBatch);
  for (auto& label : label_values) label = static_cast<int64_t>(generator.next_u64() % 10);
  const Tensor labels = from_vector(label_values, {kBatch}, {.dtype = DType::Int64});
  for (auto _ : state) {
    model->zero_grad();
    cross_entropy((*model)(images), labels).backward();
  }
  state.counters["images/s"] = benchmark::Counter(static_cast<double>(kBatch) * state.iterations(),
                                                  benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(BM_ResNetForwardBackward, resnet20 / contiguous, std::string("resnet20"),
                  MemoryFormat::Contiguous)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_ResNetForwardBackward, resnet20 / channels_last, std::string("resnet20"),
                  MemoryFormat::ChannelsLast)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_ResNetForwardBackward, resnet18 / contiguous, std::string("resnet18"),
                  MemoryFormat::Contiguous)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(2);
BENCHMARK_CAPTURE(BM_ResNetForwardBackward, resnet18 / channels_last, std::string("resnet18"),
                  MemoryFormat::ChannelsLast)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(2);

}  // namespace

BENCHMARK_MAIN();
