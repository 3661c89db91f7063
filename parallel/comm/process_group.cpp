#include "parallel/comm/process_group.h"

#include <algorithm>

#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/ops/concat.h"
#include "parallel/comm/socket.h"

namespace tandem::parallel {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
  }
  return "?";
}

// --- Work

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

void Work::mark_started() {
  std::lock_guard<std::mutex> lock(mutex_);
  started_at_ = Clock::now();
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

void check_collective_dtype(const char* backend, const std::string& op, size_t index, DType dtype,
                            bool allow_int64) {
  const bool supported = dtype == DType::Float32 || dtype == DType::BFloat16 ||
                         dtype == DType::Float16 || (allow_int64 && dtype == DType::Int64);
  TANDEM_CHECK(supported, "[", backend, "] ", op, ": tensor ", index, " is ", dtype_name(dtype),
               allow_int64 ? "; supported: float32, bfloat16, float16, int64"
                           : "; supported: float32, bfloat16, float16");
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

// --- ProcessGroup

ProcessGroup::ProcessGroup(int rank, int size, ProcessGroupOptions options)
    : rank_(rank), size_(size), options_(std::move(options)) {
  TANDEM_CHECK(size >= 1, "[process_group] size must be at least 1, got ", size);
  TANDEM_CHECK(rank >= 0 && rank < size, "[process_group] rank ", rank, " is out of range for ",
               size, " ranks");
  TANDEM_CHECK(options_.timeout.count() > 0, "[process_group] timeout must be positive");
}

ProcessGroup::~ProcessGroup() = default;

void broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor>& tensors, int root) {
  NoGradGuard no_grad;
  std::vector<DType> dtypes;  // in order of first appearance: the same on every rank
  for (const Tensor& t : tensors) {
    if (std::find(dtypes.begin(), dtypes.end(), t.dtype()) == dtypes.end()) {
      dtypes.push_back(t.dtype());
    }
  }
  for (const DType dtype : dtypes) {
    std::vector<Tensor> members, flat_parts;
    for (const Tensor& t : tensors) {
      if (t.dtype() != dtype || t.numel() == 0) continue;
      members.push_back(t);
      flat_parts.push_back(t.reshape({-1}));
    }
    if (members.empty()) continue;
    Tensor flat = cat(flat_parts);
    group.broadcast({flat}, root)->wait();
    if (group.rank() == root) continue;
    int64_t offset = 0;
    for (Tensor& t : members) {
      Tensor target = t.detach();
      target.copy_(flat.slice(offset, offset + t.numel()).view(t.shape()));
      offset += t.numel();
    }
  }
}

}  // namespace tandem::parallel
