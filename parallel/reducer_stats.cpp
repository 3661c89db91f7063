// The Reducer's timings (reducer.h): what a step leaves for bench_cifar's overlap columns.
#include <algorithm>

#include "engine/elapsed.h"
#include "parallel/bucket_trace.h"
#include "parallel/reducer.h"

namespace tandem::parallel {

void Reducer::record_step(Clock::time_point backward_end) {
  ReducerStepRecord record;
  record.backward_end = backward_end;
  for (const Bucket& bucket : buckets_) {
    BucketTiming timing;
    timing.parameters = bucket.parameters.size();
    timing.bytes = static_cast<size_t>(bucket.numel) * dtype_size(DType::Float32);
    timing.payload_bytes = hook_->payload_bytes(bucket.numel);
    timing.ready_ms = milliseconds_between(backward_end, bucket.ready_at);
    trace_bucket_all_reduce(group_->backend_name(), record.buckets.size(), timing.bytes,
                            timing.parameters, bucket.work);
    record.buckets.push_back(timing);
    record.works.push_back(bucket.work);
  }
  record.finalized = Clock::now();
  step_record_ = std::move(record);
}

// Times are host times (Work::started_at()): on NCCL, when the watchdog saw the device reach and
// pass each all-reduce, while ready_ms is when the hook queued the bucket's last copy; the host
// runs ahead of the device, so on GPUs read them as an approximation of the overlap.
ReducerStepStats Reducer::stats_of(const ReducerStepRecord& record) {
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

std::optional<ReducerStepRecord> Reducer::take_step_record() const {
  std::lock_guard lock(mutex_);
  std::optional<ReducerStepRecord> record = std::move(step_record_);
  step_record_.reset();
  return record;
}

ReducerStepStats Reducer::last_step() const {
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
