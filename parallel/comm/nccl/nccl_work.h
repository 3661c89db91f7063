#pragma once
// NcclWork: one NCCL collective as a Work (Note [NCCL stream order] in nccl_process_group.h).
// Internal to the NCCL process group (nccl_process_group.cpp and its watchdog); not installed.
#include <chrono>
#include <string>

#include "engine/cuda/runtime/stream.h"
#include "parallel/comm/process_group.h"

namespace tandem::parallel {

/// Between two polls of what usually ends within microseconds (an NCCL launch, a collective the
/// host waits for): yields for the first 2 ms since `start`, then sleeps `pause` per poll.
void pause_between_polls(std::chrono::steady_clock::time_point start,
                         std::chrono::steady_clock::duration pause);

/// The events are recorded by the group before the Work is handed out and never again, so reading
/// them needs no lock.
class NcclWork final : public Work {
 public:
  using Clock = std::chrono::steady_clock;

  NcclWork(std::string description, std::chrono::milliseconds timeout, int device,
           bool host_blocking_wait);

  /// Note [Work wait and synchronize]: the caller's current stream waits for the end event; the
  /// host goes on. A barrier's wait() blocks the host, as PyTorch's does.
  void wait(std::chrono::milliseconds timeout) override;
  void synchronize(std::chrono::milliseconds timeout) override;

  /// The end event itself, not the watchdog's view of it (which lags by up to one watchdog poll).
  /// Safe after a failure too: the watchdog fails the pending Works before it aborts the
  /// communicator, and only the abort lets an unfinished collective's end event complete.
  bool completed() const override { return Work::completed() || (recorded_ && end_.query()); }

  // --- for the group and its watchdog
  cuda::Event& start_event() { return start_; }
  cuda::Event& end_event() { return end_; }
  /// The end event is recorded: the Work is queued on the device from now on.
  void set_recorded() {
    queued_at_ = Clock::now();
    recorded_ = true;
  }
  bool recorded() const { return recorded_; }
  /// When set_recorded() was called: what the watchdog's timeout counts from, so that the
  /// set-up inside ncclGroupEnd does not count against it (Note [NCCL rendezvous]).
  Clock::time_point queued_at() const { return queued_at_; }
  bool start_seen = false;  ///< the watchdog saw the start event complete (watchdog thread only)

 private:
  void wait_for_end_event(std::chrono::milliseconds timeout);
  void order_current_stream() const;

  const int device_;
  const bool host_blocking_wait_;
  Clock::time_point queued_at_{};
  cuda::Event start_;
  cuda::Event end_;
  bool recorded_ = false;
};

}  // namespace tandem::parallel
