#include "parallel/reducer_timer.h"

#include <algorithm>

#include "engine/elapsed.h"
#include "parallel/bucket_trace.h"

namespace tandem::parallel {

void ReducerTimer::bucket_ready(size_t k) {
  const Clock::time_point now = Clock::now();
  std::lock_guard lock(mutex_);
  if (ready_at_.size() <= k) ready_at_.resize(k + 1);
  ready_at_[k] = now;
}

void ReducerTimer::end_step(Clock::time_point backward_end, std::vector<BucketTiming> buckets,
                            std::vector<std::shared_ptr<Work>> works) {
  std::lock_guard lock(mutex_);
  if (ready_at_.size() < buckets.size()) ready_at_.resize(buckets.size());
  ReducerStepRecord record;
  record.backward_end = backward_end;
  for (size_t k = 0; k < buckets.size(); ++k) {
    BucketTiming& timing = buckets[k];
    timing.ready_ms = milliseconds_between(backward_end, ready_at_[k]);
    trace_bucket_all_reduce(backend_, k, timing.bytes, timing.parameters, works[k]);
  }
  record.buckets = std::move(buckets);
  record.works = std::move(works);
  record.finalized = Clock::now();
  step_record_ = std::move(record);
}

// Times are host times (Work::started_at()): on NCCL, when the watchdog saw the device reach and
// pass each all-reduce, while ready_ms is when the hook queued the bucket's last copy; the host
// runs ahead of the device, so on GPUs read them as an approximation of the overlap.
ReducerStepStats ReducerTimer::stats_of(const ReducerStepRecord& record) {
  // On NCCL this blocks until the device has run the all-reduces. A failed one already threw
  // from finalize() or will from the next collective; its times are what it has.
  for (const std::shared_ptr<Work>& work : record.works) {
    try {
      work->synchronize();
    } catch (const std::exception&) {
    }
  }
  ReducerStepStats stats;
  double hidden_ms = 0;
  for (size_t k = 0; k < record.buckets.size(); ++k) {
    BucketTiming timing = record.buckets[k];
    const std::shared_ptr<Work>& work = record.works[k];
    timing.started_ms = milliseconds_between(record.backward_end, work->started_at());
    timing.ended_ms = milliseconds_between(record.backward_end, work->ended_at());
    stats.comm_ms += timing.ended_ms - timing.started_ms;
    stats.payload_bytes += timing.payload_bytes;
    hidden_ms += std::max(0.0, std::min(timing.ended_ms, 0.0) - timing.started_ms);
    stats.buckets.push_back(timing);
  }
  stats.hidden_fraction = stats.comm_ms > 0 ? hidden_ms / stats.comm_ms : 0;
  stats.wait_ms = milliseconds_between(record.backward_end, record.finalized);
  return stats;
}

bool ReducerStepRecord::collectives_done() const {
  return std::all_of(works.begin(), works.end(),
                     [](const std::shared_ptr<Work>& work) { return work->completed(); });
}

std::optional<ReducerStepRecord> ReducerTimer::take_step_record() const {
  std::lock_guard lock(mutex_);
  std::optional<ReducerStepRecord> record = std::move(step_record_);
  step_record_.reset();
  return record;
}

ReducerStepStats ReducerTimer::last_step() const {
  const std::optional<ReducerStepRecord> record = take_step_record();
  if (!record) {
    std::lock_guard lock(mutex_);
    return last_step_;
  }
  ReducerStepStats stats = stats_of(*record);  // outside the lock: on NCCL it waits
  std::lock_guard lock(mutex_);
  last_step_ = stats;
  return stats;
}

}  // namespace tandem::parallel
