#include "parallel/comm/work.h"

#include "engine/error.h"
#include "parallel/comm/socket.h"

namespace tandem::parallel {

Work::Work(std::string description, std::chrono::milliseconds default_timeout)
    : description_(std::move(description)), default_timeout_(default_timeout) {}

Work::~Work() = default;

void Work::wait(std::chrono::milliseconds timeout) {
  synchronize(timeout);
}

void Work::synchronize(std::chrono::milliseconds timeout) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // A huge timeout means "forever"; now() + milliseconds::max() would overflow.
    const bool forever = timeout > std::chrono::hours(24 * 365);
    if (forever) done_.wait(lock, [&] { return completed_; });
    if (!forever) done_.wait_for(lock, timeout, [&] { return completed_; });
  }
  finish_synchronize(timeout);
}

void Work::finish_synchronize(std::chrono::milliseconds timeout) const {
  std::lock_guard<std::mutex> lock(mutex_);
  TANDEM_CHECK(completed_, description_, " did not complete within ", net::format_duration(timeout),
               " (a peer may have died or hung, or the ranks issued different collectives)");
  if (error_) std::rethrow_exception(error_);
}

bool Work::completed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

bool Work::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && error_ != nullptr;
}

Work::Clock::time_point Work::started_at() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return started_at_;
}

Work::Clock::time_point Work::ended_at() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ended_at_;
}

int Work::source_rank() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return source_rank_;
}

void Work::mark_started() {
  std::lock_guard<std::mutex> lock(mutex_);
  started_at_ = Clock::now();
}

void Work::set_source_rank(int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  source_rank_ = rank;
}

void Work::mark_completed(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) return;  // the first completion wins (NCCL: a failure vs a late success)
    ended_at_ = Clock::now();
    if (started_at_ == Clock::time_point{}) started_at_ = ended_at_;
    error_ = std::move(error);
    completed_ = true;
  }
  done_.notify_all();
}

// --- then()

namespace {

class ContinuedWork final : public Work {
 public:
  ContinuedWork(std::shared_ptr<Work> work, std::function<void()> continuation)
      : Work(work->description(), work->default_timeout()),
        work_(std::move(work)),
        continuation_(std::move(continuation)) {}

  void wait(std::chrono::milliseconds timeout) override {
    work_->wait(timeout);
    continue_once();
  }
  void synchronize(std::chrono::milliseconds timeout) override {
    work_->synchronize(timeout);
    continue_once();
  }
  bool completed() const override { return work_->completed(); }
  bool failed() const override { return work_->failed(); }
  Clock::time_point started_at() const override { return work_->started_at(); }
  Clock::time_point ended_at() const override { return work_->ended_at(); }
  int source_rank() const override { return work_->source_rank(); }

 private:
  void continue_once() {
    std::lock_guard<std::mutex> lock(continue_mutex_);
    if (continued_) return;
    continued_ = true;  // before running: a continuation that threw is not run twice
    continuation_();
  }

  const std::shared_ptr<Work> work_;
  const std::function<void()> continuation_;
  std::mutex continue_mutex_;  // guards continued_
  bool continued_ = false;
};

}  // namespace

std::shared_ptr<Work> then(std::shared_ptr<Work> work, std::function<void()> continuation) {
  TANDEM_CHECK(work != nullptr && continuation, "[then] needs a Work and a continuation");
  return std::make_shared<ContinuedWork>(std::move(work), std::move(continuation));
}

}  // namespace tandem::parallel
