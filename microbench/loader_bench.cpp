// DataLoader throughput with augmentation (crop + flip + normalise), batch 128, on synthetic
// CIFAR-shaped data: images/s for 1 and 2 worker threads. The loader must stay well ahead of
// what the model consumes (bench_resnet). BM_LoaderToCpu1 / BM_LoaderToCuda0 add the upload to a
// device (engine/upload.h).
//
//   ./build/microbench/bench_loader

#include <benchmark/benchmark.h>

#include "data/cifar10.h"
#include "data/data_loader.h"
#include "engine/device_runtime.h"

namespace {

using namespace tandem::data;

// Delivers batches of a loader to `device` for as long as the benchmark runs; images/s counted.
void deliver(benchmark::State& state, tandem::Device device) {
  const auto dataset = std::make_shared<const CifarImages>(
      std::make_shared<CifarDataset>(synthetic_cifar10(10000, 0)));
  const auto sampler = std::make_shared<RandomSampler>(10000, 0);
  DataLoader loader(dataset, sampler,
                    {.batch_size = 128,
                     .workers = static_cast<int>(state.range(0)),
                     .prefetch = 4,
                     .device = device});
  int64_t images = 0;
  int64_t epoch = 0;
  loader.start_epoch(epoch);
  for (auto _ : state) {
    auto batch = loader.next();
    if (!batch) {
      loader.start_epoch(++epoch);
      batch = loader.next();
    }
    // On a GPU, wait for the upload itself, so the rate is that of batches really on the device.
    tandem::runtime_for(device).synchronize(device);
    images += batch->labels.size(0);
  }
  state.counters["images/s"] =
      benchmark::Counter(static_cast<double>(images), benchmark::Counter::kIsRate);
}

void BM_LoaderAugmented(benchmark::State& state) {
  deliver(state, tandem::Device::cpu());
}

// Through an UploadStream (Note [Uploads]): a plain copy for cpu:1; pinned staging, a copy stream
// and an event for cuda:0, which needs a GPU.
void BM_LoaderToCpu1(benchmark::State& state) {
  deliver(state, tandem::Device::cpu(1));
}

void BM_LoaderToCuda0(benchmark::State& state) {
  if (!tandem::cuda_available()) {
    state.SkipWithError(("no GPU: " + tandem::cuda_unavailable_reason()).c_str());
    for (auto _ : state) {
    }
    return;
  }
  deliver(state, tandem::Device::cuda(0));
}

BENCHMARK(BM_LoaderAugmented)
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK(BM_LoaderToCpu1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_LoaderToCuda0)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
