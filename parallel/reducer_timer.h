#pragma once
/// ReducerTimer: where a DDP step's gradient reductions spent their time, for bench_cifar's
/// overlap columns (Note [Phase timing] in apps/bench_cifar/timed_steps.h) and the profiler's
/// bucket tracks (bucket_trace.h). The Reducer tells it when each bucket's last gradient arrived
/// (bucket_ready) and, at the end of backward, each bucket's sizes and collective (end_step); the
/// collectives' own times are read later, once they have run, so that timing never makes a step
/// wait for the device.

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "parallel/comm/process_group.h"

namespace tandem::parallel {

/// Where one bucket's time went in the last step, in ms relative to the end of backward
/// (negative: before it ended).
struct BucketTiming {
  size_t parameters = 0;
  size_t bytes = 0;          ///< the bucket's float32 gradients
  size_t payload_bytes = 0;  ///< what its hook handed to collectives (compression: fewer)
  double ready_ms = 0;       ///< its last gradient arrived
  double started_ms = 0;     ///< its all-reduce started running
  double ended_ms = 0;       ///< its all-reduce finished
};

/// What a finished step leaves for its timings (ReducerTimer::take_step_record): sizes and
/// arrival times now, the collectives' times once they have run.
struct ReducerStepRecord {
  using Clock = std::chrono::steady_clock;
  Clock::time_point backward_end;            ///< when finalize() started
  Clock::time_point finalized;               ///< when finalize() returned
  std::vector<BucketTiming> buckets;         ///< sizes and ready_ms so far
  std::vector<std::shared_ptr<Work>> works;  ///< per bucket

  /// Every bucket's collective has ended (never blocks): stats_of() then waits for nothing.
  bool collectives_done() const;
};

struct ReducerStepStats {
  std::vector<BucketTiming> buckets;
  double comm_ms = 0;          ///< time all-reduces ran, summed over buckets
  double hidden_fraction = 0;  ///< share of comm_ms that ran before backward ended
  double wait_ms = 0;          ///< how long finalize() waited after backward ended
  size_t payload_bytes = 0;    ///< gradient bytes handed to collectives, summed over buckets
};

class ReducerTimer {
 public:
  using Clock = std::chrono::steady_clock;

  /// `backend`: the process group's name, for the profiler's tracks ("DDP all-reduce (gloo)").
  explicit ReducerTimer(std::string backend) : backend_(std::move(backend)) {}

  /// Bucket k's last gradient of this step has arrived (its all-reduce may launch).
  void bucket_ready(size_t k);
  /// A step ended: backward ended at `backward_end`, and `buckets` (parameters, bytes and
  /// payload_bytes filled in) were reduced by `works`, one per bucket. Keeps the step's record
  /// until last_step() or take_step_record() reads it.
  void end_step(Clock::time_point backward_end, std::vector<BucketTiming> buckets,
                std::vector<std::shared_ptr<Work>> works);

  /// Timings of the last finished step. On NCCL, whose all-reduces may still be running on the
  /// device when backward() returns, this first waits for them (Work::synchronize()).
  ReducerStepStats last_step() const;
  /// The last finished step's record, taken without waiting for anything; nullopt when no step
  /// finished since the last take (or last_step()). For timed loops that must not wait for the
  /// device every step (Note [Phase timing] in apps/bench_cifar/timed_steps.h): they read it
  /// with stats_of() once record.collectives_done(), or after synchronising the device.
  std::optional<ReducerStepRecord> take_step_record() const;
  /// The timings of `record`, waiting for its collectives first (Work::synchronize()).
  static ReducerStepStats stats_of(const ReducerStepRecord& record);

 private:
  std::string backend_;
  mutable std::mutex mutex_;  // guards everything below (end_step runs on the backward thread)
  std::vector<Clock::time_point> ready_at_;  ///< per bucket: when its last gradient arrived
  /// The last step, until last_step() or take_step_record() reads it; turned into
  /// ReducerStepStats on demand, when every all-reduce has ended (on NCCL only once the device
  /// has run them).
  mutable std::optional<ReducerStepRecord> step_record_;
  mutable ReducerStepStats last_step_;
};

}  // namespace tandem::parallel
