#pragma once
/// Work: one asynchronous collective or point-to-point operation of a ProcessGroup
/// (process_group.h), and then(), which chains a continuation onto one.
///
/// Note [Work wait and synchronize]: wait() means "the result is ready for what the calling
/// thread does next", synchronize() means "the operation has finished, and the host knows".
/// For a backend that runs collectives on the host (Gloo) both block until the Work is done.
/// For NCCL, whose collectives run on a CUDA stream, wait() only makes the calling thread's
/// current stream of the device wait for the collective's end event (the host goes on, and
/// kernels queued next run after it: PyTorch's WorkNCCL::wait), while synchronize() blocks the
/// host until the collective has run (or failed, or timed out). Use synchronize() before the
/// host itself needs the collective done: before timing it, or where a failure must surface
/// now. Reading a CUDA result back (to_vector, item) after wait() is already safe: that copy
/// runs on the current stream, behind the wait. A barrier's wait() always blocks the host.

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace tandem::parallel {

/// One asynchronous operation. A backend creates it when the operation is submitted and
/// finishes it when the operation has run.
class Work {
 public:
  using Clock = std::chrono::steady_clock;

  /// `description` names the operation in messages, e.g. "[gloo] allreduce #3 on rank 1 of 2";
  /// `default_timeout` bounds wait() without an argument.
  Work(std::string description, std::chrono::milliseconds default_timeout);
  virtual ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  /// Makes the result ready for the calling thread (Note [Work wait and synchronize]) and
  /// rethrows the operation's error. On a host backend (Gloo) this blocks until the operation
  /// is done and throws a tandem::Error naming it when `timeout` passes first (the operation
  /// itself goes on in the background until its own timeout, the group's options.timeout). On
  /// NCCL it orders the current stream after the collective and returns; errors found later
  /// surface from synchronize() and from the group's next collective.
  virtual void wait(std::chrono::milliseconds timeout);
  void wait() { wait(default_timeout_); }
  /// Blocks the host until the operation is done (and, like wait(), orders the calling thread's
  /// later work after it); rethrows its error; throws naming the operation when `timeout`
  /// passes first.
  virtual void synchronize(std::chrono::milliseconds timeout);
  void synchronize() { synchronize(default_timeout_); }
  /// Done, successfully or not; never blocks.
  virtual bool completed() const;
  /// Done with an error (wait() would throw it).
  virtual bool failed() const;

  /// When the operation started running and when it ended; a default-constructed time_point
  /// until then. For DDP's overlap instrumentation. Gloo: when its thread ran it. NCCL: when
  /// the group's watchdog saw the device reach and pass it (host times, late by up to the
  /// watchdog's poll interval, about 1 ms).
  virtual Clock::time_point started_at() const;
  virtual Clock::time_point ended_at() const;

  /// The rank a receive got its message from, once it completed (what irecv() from
  /// kAnySource needs to know); -1 for any other Work, and before then.
  virtual int source_rank() const;

  const std::string& description() const { return description_; }
  std::chrono::milliseconds default_timeout() const { return default_timeout_; }

  // --- for backends
  void mark_started();
  /// Completes the Work; `error` (may be null) is what wait() rethrows. Only the first call
  /// counts.
  void mark_completed(std::exception_ptr error = nullptr);
  /// Sets source_rank(); call before mark_completed().
  void set_source_rank(int rank);

 protected:
  /// The end of synchronize() once its wait of `timeout` is over, without waiting: throws that
  /// the Work did not complete within `timeout`, or rethrows its error.
  void finish_synchronize(std::chrono::milliseconds timeout) const;

 private:
  const std::string description_;
  const std::chrono::milliseconds default_timeout_;
  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable done_;
  bool completed_ = false;
  std::exception_ptr error_;
  Clock::time_point started_at_{};
  Clock::time_point ended_at_{};
  int source_rank_ = -1;
};

/// A Work that finishes what `work` started: its first wait() or synchronize() waits for `work`
/// and then runs `continuation` on the calling thread (once; not when `work` failed). Like
/// PyTorch's Future.then(), for communication hooks that post-process a collective's result
/// (Note [Gradient compression]) and for the list forms of the collectives, which copy a flat
/// result out into the caller's tensors (Note [Flat collectives] in process_group.h). On NCCL
/// the continuation queues its kernels on the calling thread's current stream, behind the wait;
/// synchronize() does not wait for those kernels. completed(), started_at(), ended_at() and
/// source_rank() are `work`'s.
std::shared_ptr<Work> then(std::shared_ptr<Work> work, std::function<void()> continuation);

}  // namespace tandem::parallel
