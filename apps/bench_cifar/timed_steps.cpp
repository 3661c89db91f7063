#include "apps/bench_cifar/timed_steps.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <optional>

#include "engine/device_runtime.h"
#include "engine/elapsed.h"
#include "engine/tandem.h"
#include "parallel/data_parallel.h"
#include "parallel/distributed_data_parallel.h"

namespace tandem::apps::bench {
namespace {

using Clock = std::chrono::steady_clock;

/// The timing marks of every device of a setup at one point of the loop, in devices' order.
using Marks = std::vector<std::unique_ptr<TimingMark>>;

Marks mark_all(const std::vector<Device>& devices) {
  Marks marks;
  for (const Device& device : devices) marks.push_back(runtime_for(device).mark_time(device));
  return marks;
}

void synchronize(const std::vector<Device>& devices) {
  for (const Device& device : devices) runtime_for(device).synchronize(device);
}

// Milliseconds from `origin` to `at` on the device that reached `at` last (Note [Phase timing]).
double latest_ms(const Marks& origin, const Marks& at) {
  double latest = 0;
  for (size_t d = 0; d < origin.size(); ++d)
    latest = std::max(latest, origin[d]->elapsed_ms(*at[d]));
  return latest;
}

// Step start, forward (with the loss) done, backward done, optimizer step done.
constexpr size_t kBoundaries = 4;

// What a timed step leaves behind, read after the loop.
struct TimedStep {
  std::array<Marks, kBoundaries> marks;
  Measurement host;  ///< DataParallel's timings, taken on the host as the step ran
  std::optional<parallel::ReducerStepRecord> ddp_record;  ///< until its all-reduces have ended
  std::optional<parallel::ReducerStepStats> ddp;
};

// One training step; with `timed`, a mark on every device at each phase boundary. Returns the
// loss, detached (Note [Loss per step]: the loss lives only for its own step, so its graph's
// memory goes with it).
Tensor train_step(TrainingSetup& s, const data::Batch& batch, bool phase_sync, TimedStep* timed) {
  const auto boundary = [&](size_t k) {
    if (phase_sync && k > 0) synchronize(s.devices);
    if (timed != nullptr) timed->marks[k] = mark_all(s.devices);
  };
  boundary(0);
  s.stepper().zero_grad();
  Tensor loss = cross_entropy(s.model->forward(batch.images), batch.labels);
  boundary(1);
  loss.backward();
  boundary(2);
  s.stepper().step();
  boundary(3);
  return loss.detach();
}

// What the wrapper says of the step just run: DataParallel's host timings now, DDP's record to
// read once its all-reduces have ended.
void take_wrapper_timings(const TrainingSetup& s, TimedStep& step) {
  if (s.dp) {
    const parallel::DataParallelTimings& t = s.dp->last_timings();
    step.host.scatter_ms = t.scatter_ms;
    step.host.replicate_ms = t.replicate_ms;
    step.host.apply_ms = t.apply_ms;
    step.host.gather_ms = t.gather_ms;
    step.host.reduce_ms = t.reduce_ms;
  }
  if (s.ddp) step.ddp_record = s.ddp->reducer().timer().take_step_record();
}

// Reads the DDP records of steps [*next, end) in order, as long as their all-reduces have ended
// (every one when `wait`: after the loop's last synchronisation, which has run them).
void read_ddp_records(std::vector<TimedStep>& steps, size_t& next, size_t end, bool wait) {
  for (; next < end; ++next) {
    TimedStep& step = steps[next];
    if (!step.ddp_record) continue;
    if (!wait && !step.ddp_record->collectives_done()) return;
    step.ddp = parallel::ReducerTimer::stats_of(*step.ddp_record);
    step.ddp_record.reset();  // its Works hold the compressed buckets of a comm hook
  }
}

// Per-bucket sums over the timed steps, for the per-bucket means.
struct BucketTotals {
  std::vector<BucketStat> buckets;
  int steps = 0;  ///< steps whose bucket layout matched the last one's

  void add(const parallel::ReducerStepStats& step) {
    // The layout changes once (the rebuild at step 2, Note [Bucket ordering]); a warm-up of 0
    // can time a step from before it, which the per-bucket means leave out.
    if (buckets.size() != step.buckets.size()) {
      buckets.assign(step.buckets.size(), BucketStat{});
      steps = 0;
    }
    for (size_t k = 0; k < step.buckets.size(); ++k) {
      const parallel::BucketTiming& b = step.buckets[k];
      buckets[k].parameters = b.parameters;
      buckets[k].bytes = static_cast<double>(b.bytes);
      buckets[k].ready_ms += b.ready_ms;
      buckets[k].started_ms += b.started_ms;
      buckets[k].ended_ms += b.ended_ms;
    }
    ++steps;
  }

  std::vector<BucketStat> means() const {
    std::vector<BucketStat> out = buckets;
    const double n = std::max(1, steps);
    for (BucketStat& b : out) {
      b.ready_ms /= n;
      b.started_ms /= n;
      b.ended_ms /= n;
    }
    return out;
  }
};

// One step's measurement, from its marks (against the loop's `origin`) and wrapper timings.
Measurement measurement_of(const TimedStep& step, const Marks& origin, BucketTotals& buckets) {
  Measurement m = step.host;
  std::array<double, kBoundaries> at{};
  for (size_t k = 0; k < kBoundaries; ++k) at[k] = latest_ms(origin, step.marks[k]);
  m.forward_ms = at[1] - at[0];
  m.backward_ms = at[2] - at[1];
  m.optimizer_ms = at[3] - at[2];
  if (step.ddp) {
    m.comm_ms = step.ddp->comm_ms;
    m.hidden_fraction = step.ddp->hidden_fraction;
    m.wait_ms = step.ddp->wait_ms;
    m.grad_bytes_per_step = static_cast<double>(step.ddp->payload_bytes);
    buckets.add(*step.ddp);
  }
  return m;
}

}  // namespace

void run_timed_steps(const TimedStepsOptions& o, int64_t batch, TrainingSetup& s,
                     const std::vector<data::Batch>& pool, parallel::ProcessGroup* group,
                     Measurement& m) {
  const auto batch_of = [&](int i) -> const data::Batch& {
    return pool[static_cast<size_t>(i) % pool.size()];
  };
  for (int i = 0; i < o.warmup; ++i) train_step(s, batch_of(i), o.phase_sync, nullptr);
  if (group) group->barrier()->wait();  // the ranks start the clock together
  std::vector<TimedStep> steps(static_cast<size_t>(o.steps));
  synchronize(s.devices);  // Note [Phase timing]: the first of the loop's two
  const Marks origin = mark_all(s.devices);
  const Clock::time_point start = Clock::now();
  Tensor last_loss;
  size_t read = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    last_loss = train_step(s, batch_of(o.warmup + static_cast<int>(i)), o.phase_sync, &steps[i]);
    take_wrapper_timings(s, steps[i]);
    read_ddp_records(steps, read, i + 1, /*wait=*/false);
  }
  synchronize(s.devices);  // the second
  const double elapsed_ms = milliseconds_since(start);
  read_ddp_records(steps, read, steps.size(), /*wait=*/true);
  Measurement sums;
  BucketTotals buckets;
  for (const TimedStep& step : steps) add_step(sums, measurement_of(step, origin, buckets));
  m.ms_per_step = elapsed_ms / o.steps;
  m.images_per_s = static_cast<double>(batch) * o.steps / (elapsed_ms / 1e3);
  set_step_means(m, sums, o.steps);
  m.buckets = buckets.means();
  m.final_loss = last_loss.item();
}

}  // namespace tandem::apps::bench
