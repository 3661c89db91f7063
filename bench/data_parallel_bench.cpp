// ResNet-20 training steps (forward, loss, backward, SGD), batch 128, on one device against
// DataParallel over several virtual CPU devices, with where DataParallel's time goes.
//
//   ./build/bench/bench_data_parallel [--benchmark_filter=dp]
//
// Each configuration gets all of the process's CPU threads; DataParallel splits them over its
// replicas (2 replicas on 2 cores: one each).

#include <benchmark/benchmark.h>

#include "engine/tandem.h"
#include "nn/resnet.h"
#include "nn/sgd.h"
#include "parallel/data_parallel.h"

namespace {

using namespace tandem;
constexpr int64_t kBatch = 128;

struct Workload {
  Tensor images;
  Tensor labels;
};

Workload make_workload() {
  Generator generator(0);
  std::vector<int64_t> labels(kBatch);
  for (auto& label : labels) label = static_cast<int64_t>(generator.next_u64() % 10);
  return {randn({kBatch, 3, 32, 32}, generator),
          from_vector(labels, {kBatch}, {.dtype = DType::Int64})};
}

// One training step; the first ones also build oneDNN's primitives for each shard shape.
void step(nn::Module& model, nn::Sgd& sgd, const Workload& work) {
  sgd.zero_grad();
  cross_entropy(model(work.images), work.labels).backward();
  sgd.step();
}

constexpr int kWarmupSteps = 2;

void train_steps(benchmark::State& state, nn::Module& model) {
  const Workload work = make_workload();
  nn::Sgd sgd(model.parameters(), {.lr = 0.01f, .momentum = 0.9f});
  for (int i = 0; i < kWarmupSteps; ++i) step(model, sgd, work);
  for (auto _ : state) step(model, sgd, work);
  state.counters["images/s"] = benchmark::Counter(static_cast<double>(kBatch) * state.iterations(),
                                                  benchmark::Counter::kIsRate);
}

void BM_SingleDevice(benchmark::State& state) {
  Generator generator(0);
  const auto model = nn::make_resnet("resnet20", generator);
  train_steps(state, *model);
}

void BM_DataParallel(benchmark::State& state, const std::string& devices, bool persistent) {
  Generator generator(0);
  parallel::DataParallel model(nn::make_resnet("resnet20", generator),
                               parallel::parse_device_list(devices),
                               {.output_device = std::nullopt, .persistent_replicas = persistent});
  const Workload work = make_workload();
  nn::Sgd sgd(model.parameters(), {.lr = 0.01f, .momentum = 0.9f});
  for (int i = 0; i < kWarmupSteps; ++i) step(model, sgd, work);
  parallel::DataParallelTimings total;
  for (auto _ : state) {
    step(model, sgd, work);
    const parallel::DataParallelTimings step = model.last_timings();
    total.scatter_ms += step.scatter_ms;
    total.replicate_ms += step.replicate_ms;
    total.apply_ms += step.apply_ms;
    total.gather_ms += step.gather_ms;
    total.reduce_ms += step.reduce_ms;
  }
  const double steps = static_cast<double>(state.iterations());
  state.counters["images/s"] =
      benchmark::Counter(static_cast<double>(kBatch) * steps, benchmark::Counter::kIsRate);
  state.counters["scatter_ms"] = total.scatter_ms / steps;
  state.counters["replicate_ms"] = total.replicate_ms / steps;
  state.counters["fwd_ms"] = total.apply_ms / steps;
  state.counters["gather_ms"] = total.gather_ms / steps;
  state.counters["reduce_ms"] = total.reduce_ms / steps;
}

BENCHMARK(BM_SingleDevice)
    ->Name("single/cpu:0")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(8);
BENCHMARK_CAPTURE(BM_DataParallel, dp, std::string("cpu:0,cpu:1"), true)
    ->Name("dp/cpu:0,cpu:1/persistent")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(8);
BENCHMARK_CAPTURE(BM_DataParallel, dp, std::string("cpu:0,cpu:1"), false)
    ->Name("dp/cpu:0,cpu:1/rebuilt")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(8);
BENCHMARK_CAPTURE(BM_DataParallel, dp, std::string("cpu:0,cpu:0"), true)
    ->Name("dp/cpu:0,cpu:0/persistent")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(8);

}  // namespace

BENCHMARK_MAIN();
