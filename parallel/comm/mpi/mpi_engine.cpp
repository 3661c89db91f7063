#include "parallel/comm/mpi/mpi_engine.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's extensions: MPIX_Query_cuda_support
#endif

#include "engine/error.h"
#include "parallel/comm/mpi/mpi_datatypes.h"
#include "parallel/comm/socket.h"

namespace tandem::parallel {
namespace {

// Note [MPI polling]: how the engine's thread tests outstanding requests. Open MPI moves a
// non-blocking operation only inside MPI calls, so the thread tests in a tight loop while
// operations are completing, yielding the core between rounds so that the rank's own compute
// threads still get it. Once nothing has completed for kSpinFor (a peer is still computing and
// has not joined the collective yet), it sleeps kPollEvery between rounds instead of spinning a
// core away from backward: about 3 % of a core while a peer is late, against a small
// all-reduce's tens of microseconds while both are there (docs/parallel.md, "MPI progress and
// overlap").
// Sleeping is wrong once every rank is in the operation: what is left is transfer, and some of
// Open MPI's schedules take thousands of rounds, each moved on by a test. libnbc's MPI_Ireduce on
// 2 ranks pipelines anything from 64 KiB in 8 KiB segments ("chain"), so a 16 MiB reduce took
// 0.5 s and a 64 MiB one 2.3 s at one round per kPollEvery, against 12 and 79 ms spinning
// (bench_collectives, 2 ranks, 2026-11-28; docs/benchmarks.md). So an operation whose
// consistency check has completed (an all-gather over every rank: MpiOperation::
// all_ranks_joined) is tested without sleeping until it ends, as a blocking MPI call would be,
// also when a peer dies in the middle (mpirun or the timeout then ends the job). Without the
// check nothing tells a late peer from a long transfer, and the engine sleeps after kSpinFor.
constexpr auto kSpinFor = std::chrono::microseconds(2000);
constexpr auto kPollEvery = std::chrono::microseconds(200);

// The process-wide reference of Note [MPI lifetime]. Never destroyed, so that groups destroyed
// by static destructors, and the on_exit handler, find it intact.
struct Holder {
  std::mutex mutex;
  std::shared_ptr<MpiEngine> engine;
  std::string error;  // a failed start, repeated to every later caller
  bool started = false;
  bool exiting = false;
};

Holder& holder() {
  static auto* const instance = new Holder;
  return *instance;
}

// glibc's on_exit, unlike atexit, passes the exit status (Note [MPI lifetime]).
void on_process_exit(int status, void*) {
  std::shared_ptr<MpiEngine> engine;
  {
    Holder& h = holder();
    std::lock_guard<std::mutex> lock(h.mutex);
    h.exiting = true;
    if (status != 0) return;  // keep the reference: MPI is never finalised
    engine = std::move(h.engine);
  }
  // Dropped here: the engine finalises MPI now, or when the last group still alive is destroyed.
}

std::string thread_level_name(int level) {
  if (level == MPI_THREAD_SINGLE) return "MPI_THREAD_SINGLE";
  if (level == MPI_THREAD_FUNNELED) return "MPI_THREAD_FUNNELED";
  if (level == MPI_THREAD_SERIALIZED) return "MPI_THREAD_SERIALIZED";
  if (level == MPI_THREAD_MULTIPLE) return "MPI_THREAD_MULTIPLE";
  return std::to_string(level);
}

// Open MPI's answer at run time, which may differ from its headers' MPIX_CUDA_AWARE_SUPPORT
// (the library loaded need not be the one compiled against); no answer from another MPI.
bool query_cuda_support() {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

bool was_cancelled(std::vector<MPI_Status>& statuses) {
  for (MPI_Status& status : statuses) {
    int cancelled = 0;
    MPI_Test_cancelled(&status, &cancelled);
    if (cancelled != 0) return true;
  }
  return false;
}

}  // namespace

bool spin_between_tests(std::chrono::steady_clock::duration since_last_completion,
                        bool all_ranks_joined) {
  return all_ranks_joined || since_last_completion < kSpinFor;
}

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return "MPI error " + std::to_string(code);
  }
  return std::string(text, static_cast<size_t>(length));
}

void check_mpi(int code, const std::string& what) {
  TANDEM_CHECK(code == MPI_SUCCESS, "[mpi] ", what, ": ", mpi_error_string(code));
}

// --- lifetime

std::shared_ptr<MpiEngine> MpiEngine::instance() {
  Holder& h = holder();
  std::lock_guard<std::mutex> lock(h.mutex);
  TANDEM_CHECK(h.error.empty(), h.error);
  if (h.engine) return h.engine;
  TANDEM_CHECK(!h.started, "[mpi] MPI was finalised already in this process (",
               h.exiting ? "it is exiting" : "its last group is gone",
               "); MPI cannot be initialised twice");
  h.started = true;
  std::shared_ptr<MpiEngine> engine(new MpiEngine());
  if (!engine->init_error_.empty()) {
    h.error = engine->init_error_;
    TANDEM_FAIL(h.error);
  }
  ::on_exit(on_process_exit, nullptr);
  h.engine = engine;
  return engine;
}

MpiEngine::MpiEngine() {
  thread_ = std::thread([this] { thread_main(); });
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait(lock, [&] { return initialised_; });
}

MpiEngine::~MpiEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MpiEngine::initialise() {
  int already = 0;
  MPI_Initialized(&already);
  int provided = MPI_THREAD_SINGLE;
  if (already != 0) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized != 0) {
      init_error_ = "[mpi] MPI was finalised already in this process; it cannot start again";
    } else {
      MPI_Query_thread(&provided);
    }
  } else {
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    owns_mpi_ = true;
  }
  if (init_error_.empty() && provided < MPI_THREAD_MULTIPLE) {
    init_error_ = "[mpi] MPI provides only " + thread_level_name(provided) +
                  (owns_mpi_ ? "" : " (the program initialised it)") +
                  ", but Tandem's MPI groups need MPI_THREAD_MULTIPLE (a progress thread calls "
                  "MPI while the program's threads do); use an MPI built with it (Open MPI: "
                  "configure --enable-mpi-thread-multiple, as Debian's is)";
  }
  if (init_error_.empty()) {
    cuda_aware_ = query_cuda_support();
    int* upper_bound = nullptr;
    int found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &upper_bound, &found);
    if (found != 0 && upper_bound != nullptr) tag_upper_bound_ = *upper_bound;
    create_mpi_user_ops();
  } else if (owns_mpi_) {
    MPI_Finalize();  // of no use at this level; the error is repeated to every later caller
    owns_mpi_ = false;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  initialised_ = true;
  wake_.notify_all();
}

void MpiEngine::finalise() {
  free_mpi_user_ops();
  if (owns_mpi_) MPI_Finalize();
}

// --- submitting

uint64_t MpiEngine::new_lane() {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t lane = ++lanes_made_;
  lanes_[lane];
  return lane;
}

void MpiEngine::submit(uint64_t lane, MpiOperation operation) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    submitted_.emplace_back(lane, std::move(operation));
  }
  wake_.notify_all();
}

void MpiEngine::close_lane(uint64_t lane) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = lanes_.find(lane);
    if (it != lanes_.end()) it->second.closed = true;
  }
  wake_.notify_all();
}

void MpiEngine::cancel_receives(uint64_t lane) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelling_.push_back(lane);
  }
  wake_.notify_all();
}

void MpiEngine::watch(const std::string& what, std::chrono::milliseconds timeout,
                      const std::function<void()>& call) {
  std::list<Watched>::iterator entry;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    entry = watched_.insert(watched_.end(), {what, Clock::now() + timeout, timeout});
  }
  wake_.notify_all();
  struct Unwatch {
    MpiEngine* engine;
    std::list<Watched>::iterator entry;
    ~Unwatch() {
      std::lock_guard<std::mutex> lock(engine->mutex_);
      engine->watched_.erase(entry);
    }
  } unwatch{this, entry};
  call();
}

// --- the thread

bool MpiEngine::idle() const {
  if (!submitted_.empty()) return false;
  for (const auto& [id, lane] : lanes_) {
    if (lane.running || !lane.queued.empty()) return false;
  }
  return true;
}

void MpiEngine::take_submissions() {
  for (auto& [lane, operation] : submitted_) {
    if (lane == 0) {
      active_.push_back({std::move(operation), 0, {}});
    } else {
      lanes_[lane].queued.push_back(std::move(operation));
    }
  }
  submitted_.clear();
  for (auto it = lanes_.begin(); it != lanes_.end();) {
    Lane& lane = it->second;
    if (!lane.running && !lane.queued.empty()) {
      lane.running = true;
      active_.push_back({std::move(lane.queued.front()), it->first, {}});
      lane.queued.pop_front();
    }
    if (lane.closed && !lane.running && lane.queued.empty()) {
      it = lanes_.erase(it);
    } else {
      ++it;
    }
  }
}

void MpiEngine::thread_main() {
  initialise();
  if (!init_error_.empty()) return;
  auto last_completion = Clock::now();
  std::vector<uint64_t> cancelling;
  while (take_work(cancelling)) {
    const bool started = start_new();
    if (!cancelling.empty()) cancel(cancelling);
    cancelling.clear();
    if (test_all() || started) last_completion = Clock::now();
    check_deadlines();
    if (active_.empty()) continue;
    if (spin_between_tests(Clock::now() - last_completion, joined_operation_active())) {
      std::this_thread::yield();
    } else {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, kPollEvery, [&] { return !submitted_.empty(); });
    }
  }
  finalise();
}

bool MpiEngine::joined_operation_active() const {
  return std::any_of(active_.begin(), active_.end(),
                     [](const Active& active) { return active.operation.all_ranks_joined; });
}

bool MpiEngine::take_work(std::vector<uint64_t>& cancelling) {
  std::unique_lock<std::mutex> lock(mutex_);
  take_submissions();
  cancelling.swap(cancelling_);
  if (!active_.empty() || !cancelling.empty()) return true;
  if (stopping_ && idle()) return false;
  const auto woken = [&] {
    return !submitted_.empty() || !cancelling_.empty() || (stopping_ && idle());
  };
  if (watched_.empty()) {
    wake_.wait(lock, woken);
  } else {
    Clock::time_point nearest = watched_.front().deadline;
    for (const Watched& w : watched_) nearest = std::min(nearest, w.deadline);
    wake_.wait_until(lock, nearest, woken);
  }
  return true;
}

bool MpiEngine::start_new() {
  bool started = false;
  const auto now = Clock::now();
  for (auto it = active_.begin(); it != active_.end();) {
    if (it->deadline != Clock::time_point{}) {
      ++it;
      continue;
    }
    started = true;
    it->deadline = now + it->operation.timeout;
    it->operation.work->mark_started();
    it = advance(*it) ? active_.erase(it) : std::next(it);
  }
  return started;
}

bool MpiEngine::advance(Active& active) {
  MpiOperation& operation = active.operation;
  try {
    while (operation.requests.empty()) {
      if (operation.stages.empty()) {
        finish(active, operation.error);
        return true;
      }
      operation.ran.push_back(std::move(operation.stages.front()));
      operation.stages.pop_front();
      operation.ran.back()(operation);
      operation.statuses.assign(operation.requests.size(), MPI_Status{});
    }
  } catch (const std::exception& e) {
    // Requests the failed stage posted stay with MPI: an active request cannot be freed safely,
    // and the group is broken from now on anyway.
    finish(active, operation.fail ? operation.fail(message_of(e))
                                  : std::make_exception_ptr(Error(message_of(e))));
    return true;
  }
  return false;
}

bool MpiEngine::test_all() {
  bool moved = false;
  for (auto it = active_.begin(); it != active_.end();) {
    MpiOperation& operation = it->operation;
    int done = 0;
    const int code = MPI_Testall(static_cast<int>(operation.requests.size()),
                                 operation.requests.data(), &done, operation.statuses.data());
    bool over = false;
    if (code != MPI_SUCCESS) {
      int first = code;
      if (code == MPI_ERR_IN_STATUS) {
        for (const MPI_Status& status : operation.statuses) {
          if (status.MPI_ERROR != MPI_SUCCESS && status.MPI_ERROR != MPI_ERR_PENDING) {
            first = status.MPI_ERROR;
            break;
          }
        }
      }
      const std::string why = mpi_error_string(first);
      finish(*it, operation.fail ? operation.fail(why) : std::make_exception_ptr(Error(why)));
      over = true;
    } else if (done != 0 && was_cancelled(operation.statuses)) {
      finish(*it, std::make_exception_ptr(Error(operation.work->description() +
                                                " did not complete: the group was destroyed "
                                                "first")));
      over = true;
    } else if (done != 0) {
      operation.requests.clear();
      over = advance(*it);
    }
    if (over || done != 0) moved = true;
    it = over ? active_.erase(it) : std::next(it);
  }
  return moved;
}

void MpiEngine::cancel(const std::vector<uint64_t>& lanes) {
  for (Active& active : active_) {
    const uint64_t lane = active.operation.receive_of;
    if (lane == 0 || std::find(lanes.begin(), lanes.end(), lane) == lanes.end()) continue;
    for (MPI_Request& request : active.operation.requests) MPI_Cancel(&request);
  }
}

void MpiEngine::finish(Active& active, std::exception_ptr error) {
  active.operation.work->mark_completed(std::move(error));
  if (active.lane == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = lanes_.find(active.lane);
  if (it != lanes_.end()) it->second.running = false;
}

void MpiEngine::check_deadlines() {
  const auto now = Clock::now();
  for (const Active& active : active_) {
    if (now > active.deadline)
      abort_job(active.operation.work->description(), active.operation.timeout);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Watched& watched : watched_) {
    if (now > watched.deadline) abort_job(watched.what, watched.timeout);
  }
}

void MpiEngine::abort_job(const std::string& what, std::chrono::milliseconds timeout) {
  std::fprintf(stderr,
               "%s did not complete within %s (a peer may have died or hung, or the ranks issued "
               "different collectives); MPI cannot cancel it, so this rank ends the job with "
               "MPI_Abort\n",
               what.c_str(), net::format_duration(timeout).c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return
}

}  // namespace tandem::parallel
