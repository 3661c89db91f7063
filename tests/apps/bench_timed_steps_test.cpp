// bench_cifar's timed loop (Note [Phase timing] in apps/bench_cifar/timed_steps.h) on CPU devices:
// it waits for the devices once before the timed steps and once after them, however many there
// are (Note [Counting device synchronisations]), unless --phase-sync asks for the old waits
// after every phase; and its phase times still add up to (at most) the step.
#include "apps/bench_cifar/timed_steps.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <numeric>

#include "data/cifar10.h"
#include "data/data_loader.h"
#include "engine/device_syncs.h"
#include "parallel/comm/gloo/gloo_process_group.h"
#include "parallel/comm/rendezvous/store.h"

namespace tandem::apps::bench {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kBatch = 4;

std::vector<data::Batch> one_batch() {
  std::vector<int64_t> indices(kBatch);
  std::iota(indices.begin(), indices.end(), 0);
  return {data::make_batch(data::synthetic_cifar10(kBatch, 0), indices, data::eval_transform(), 0)};
}

TrainingSetup setup_for(Mode mode, std::vector<Device> devices,
                        const std::shared_ptr<parallel::ProcessGroup>& group = nullptr) {
  return make_training_setup({.mode = mode, .arch = "resnet20", .sgd = {.lr = 0.01f}},
                             std::move(devices), group);
}

// Device synchronisations made by run_timed_steps with `options`, and what it measured.
int64_t syncs_of(const TimedStepsOptions& options, TrainingSetup& setup,
                 parallel::ProcessGroup* group, Measurement& m) {
  const std::vector<data::Batch> pool = one_batch();
  const int64_t before = device_sync_count();
  run_timed_steps(options, kBatch, setup, pool, group, m);
  return device_sync_count() - before;
}

void expect_phases_within_the_step(const Measurement& m) {
  EXPECT_GT(m.forward_ms, 0);
  EXPECT_GT(m.backward_ms, 0);
  EXPECT_GT(m.optimizer_ms, 0);
  // The step also fetches its batch and reads the wrapper's timings: the phases fit inside it.
  EXPECT_LE(m.forward_ms + m.backward_ms + m.optimizer_ms, m.ms_per_step * 1.001);
  EXPECT_GT(m.images_per_s, 0);
  EXPECT_TRUE(std::isfinite(m.final_loss)) << m.final_loss;
}

TEST(BenchTimedSteps, WaitForTheDevicesOnlyBeforeAndAfterTheTimedSteps) {
  for (const auto& devices :
       {std::vector<Device>{Device::cpu()}, std::vector<Device>{Device::cpu(0), Device::cpu(1)}}) {
    TrainingSetup setup =
        setup_for(devices.size() == 1 ? Mode::Single : Mode::DataParallel, devices);
    const auto per_loop = static_cast<int64_t>(2 * devices.size());
    for (const int steps : {1, 2}) {
      Measurement m;
      EXPECT_EQ(syncs_of({.warmup = 0, .steps = steps}, setup, nullptr, m), per_loop)
          << devices.size() << " devices, " << steps << " steps";
      expect_phases_within_the_step(m);
      if (setup.dp) {
        EXPECT_GT(m.replicate_ms, 0);  // DataParallel's own timings still come
      }
    }
  }
}

TEST(BenchTimedSteps, PhaseSyncWaitsAfterEveryPhaseAsBefore) {
  TrainingSetup setup = setup_for(Mode::Single, {Device::cpu()});
  Measurement m;
  // Three phases in each of the 1 + 1 steps, warm-up included, besides the loop's two.
  EXPECT_EQ(syncs_of({.warmup = 1, .steps = 1, .phase_sync = true}, setup, nullptr, m), 2 + 3 * 2);
  expect_phases_within_the_step(m);
}

// DDP's bucket timings are taken without waiting and read after the loop (Gloo: at once).
TEST(BenchTimedSteps, DdpBucketTimingsComeWithoutWaiting) {
  auto store =
      std::make_shared<parallel::TcpStore>(parallel::TcpStoreOptions{.port = 0, .is_server = true});
  const std::shared_ptr<parallel::ProcessGroup> group =
      std::make_shared<parallel::GlooProcessGroup>(store, 0, 1,
                                                   parallel::ProcessGroupOptions{.timeout = 30s});
  TrainingSetup setup = setup_for(Mode::Distributed, {Device::cpu()}, group);
  Measurement m;
  EXPECT_EQ(syncs_of({.warmup = 1, .steps = 2}, setup, group.get(), m), 2);
  expect_phases_within_the_step(m);
  ASSERT_FALSE(m.buckets.empty());
  EXPECT_GT(m.grad_bytes_per_step, 0);
  EXPECT_GE(m.comm_ms, 0);
  for (const BucketStat& bucket : m.buckets) EXPECT_GE(bucket.ended_ms, bucket.started_ms);
}

}  // namespace
}  // namespace tandem::apps::bench
