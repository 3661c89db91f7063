// DataLoader throughput with augmentation (crop + flip + normalise), batch 128, on synthetic
// CIFAR-shaped data: images/s for 1 and 2 worker threads. The loader must stay well ahead of
// what the model consumes (bench_resnet).
//
//   ./build/bench/bench_loader

#include <benchmark/benchmark.h>

#include "data/data_loader.h"

namespace {

using namespace tandem::data;

void BM_LoaderAugmented(benchmark::State& state) {
  const auto dataset = std::make_shared<const CifarDataset>(synthetic_cifar10(10000, 0));
  const auto sampler = std::make_shared<RandomSampler>(10000, 0);
  DataLoader loader(
      dataset, sampler,
      {.batch_size = 128, .workers = static_cast<int>(state.range(0)), .prefetch = 4});
  int64_t images = 0;
  int64_t epoch = 0;
  loader.start_epoch(epoch);
  for (auto _ : state) {
    auto batch = loader.next();
    if (!batch) {
      loader.start_epoch(++epoch);
      batch = loader.next();
    }
    images += batch->labels.size(0);
  }
  state.counters["images/s"] =
      benchmark::Counter(static_cast<double>(images), benchmark::Counter::kIsRate);
}

BENCHMARK(BM_LoaderAugmented)
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
