#pragma once
// GlooWaiters: the threads that wait for the Gloo group's pending point-to-point operations
// (Note [Gloo point-to-point] in gloo_process_group.h). Internal to the Gloo group.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem::parallel {

/// A pool that runs each submitted wait on a thread of its own while it waits: a pending
/// receive never delays another operation's completion (which could deadlock a program whose
/// send waits behind a receive that needs that send's peer to move on). Threads are started
/// when none is idle and kept for later operations.
class GlooWaiters {
 public:
  GlooWaiters() = default;
  /// Calls the abort of every operation whose wait has not returned, then joins the threads.
  ~GlooWaiters();
  GlooWaiters(const GlooWaiters&) = delete;
  GlooWaiters& operator=(const GlooWaiters&) = delete;

  /// Runs `wait` on a pool thread; `abort` makes it return early, and is called instead by the
  /// destructor while `wait` is pending (or not yet started).
  void submit(std::function<void()> wait, std::function<void()> abort);

 private:
  void loop();

  std::mutex mutex_;  // guards everything below
  std::condition_variable wake_;
  std::deque<std::pair<uint64_t, std::function<void()>>> waits_;  // submitted, not started
  std::map<uint64_t, std::function<void()>> aborts_;  // of the waits that have not returned
  uint64_t next_id_ = 0;
  size_t idle_ = 0;  // threads waiting for a job
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tandem::parallel
