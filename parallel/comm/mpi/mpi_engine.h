#pragma once
/// MpiEngine: MPI's lifetime in this process and the one thread that drives every MPI request of
/// Tandem's MPI groups (mpi_group.h). Internal: it includes <mpi.h>, which no public header does.
///
/// Note [MPI progress]: every collective and point-to-point operation is a non-blocking MPI call
/// (MPI_Iallreduce, MPI_Isend, ...) whose request the engine's thread tests until it completes.
/// Open MPI has no asynchronous progress ("OMPI progress: no" in ompi_info): a non-blocking
/// collective moves only while some thread is inside an MPI call, so without this thread a DDP
/// bucket launched during backward would sit still until finalize() waits for it, and nothing
/// would overlap. While requests are outstanding the thread calls MPI_Testall on each operation
/// in a loop, yielding the core between rounds; once no operation has completed for
/// kSpinFor, and none is known to have every rank in it, it sleeps kPollEvery between rounds
/// (Note [MPI polling] in mpi_engine.cpp says why). With nothing outstanding it sleeps until an
/// operation is submitted.
///
/// Note [MPI lanes]: a group's collectives run one after another on its lane, in submission
/// order (Note [Collective order] in process_group.h): the next starts when the previous has
/// completed, so two collectives on the same tensor never run at once, as on Gloo. An
/// operation outside any lane (point-to-point) starts at once. An operation is a list of
/// stages (the consistency check's exchanges, then the collective itself, then Avg's scaling);
/// each stage posts requests, and the next runs once they have all completed.
///
/// Note [MPI timeouts]: MPI cannot cancel a collective, and a communicator with one stuck in it
/// is unusable. So an operation still incomplete `timeout` after it started (a peer hung, or
/// issued other collectives) ends the job: the engine prints one line naming the operation and
/// calls MPI_Abort, which makes mpirun kill every rank. A peer that dies is found sooner by
/// mpirun itself, which ends the job when any rank exits abnormally. The same bound covers the
/// blocking calls that create communicators (watch()).
///
/// Note [MPI lifetime]: MPI may be initialised once per process and finalised once, after
/// every communicator is freed, and by the thread that initialised it. The engine's thread does
/// both: it calls MPI_Init_thread when the first group (or mpi_environment()) needs MPI and
/// MPI_Finalize when the engine is destroyed, which is once the last group is gone and the
/// process is exiting: a process-wide reference, dropped by an on_exit() handler, keeps the
/// engine (and MPI) alive between groups, as PyTorch finalises from an atexit handler. A process
/// that exits with a non-zero status does not finalise: MPI_Finalize waits for every other rank
/// to finalise too, which would keep a failing rank alive while the others wait for it in a
/// collective; exiting without it makes mpirun end the whole job at once (Open MPI 4.1 reports
/// "mpirun detected that one or more processes exited with non-zero status"). A program that
/// initialised MPI itself finalises it too; the engine then leaves MPI alone.

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "parallel/comm/work.h"

namespace tandem::parallel {

/// One operation the engine runs: stages that post MPI requests (Note [MPI lanes]).
struct MpiOperation {
  using Stage = std::function<void(MpiOperation&)>;

  std::shared_ptr<Work> work;
  /// How long it may take once started (Note [MPI timeouts]).
  std::chrono::milliseconds timeout{};
  /// Run in order on the engine's thread. A stage posts requests into `requests` (or none), may
  /// add stages after itself (push_front) or drop the rest (clear), may set `error`, and may
  /// throw, which fails the operation through `fail`. The next stage runs once every request
  /// posted before it has completed; their statuses are in `statuses` meanwhile.
  std::deque<Stage> stages;
  /// The stages that ran, kept until the operation completes: what they captured (the tensors,
  /// an alltoall's counts) must outlive the requests they posted.
  std::vector<Stage> ran;
  std::vector<MPI_Request> requests;
  std::vector<MPI_Status> statuses;
  /// Set by a stage: the operation ends with this error once its requests are done, and its
  /// group stays usable (a refused collective: Note [Collective consistency]).
  std::exception_ptr error;
  /// Turns a failure (a stage's exception, an MPI error code's message) into what the Work
  /// rethrows, and marks the group broken; without it the failure is rethrown as it is.
  std::function<std::exception_ptr(const std::string& failure)> fail;
  /// A receive of the group with this lane: cancel_receives(lane) cancels it.
  uint64_t receive_of = 0;
  /// Set by a stage once every rank of the group is known to have reached this operation (the
  /// consistency check's all-gather completed): what is left is transfer, which the engine then
  /// drives without sleeping until the operation ends (Note [MPI polling]).
  bool all_ranks_joined = false;
};

/// Note [MPI polling]: whether the engine's thread only yields the core between two rounds of
/// tests (true) or sleeps kPollEvery: it yields while operations are completing, or while one
/// whose ranks have all joined is outstanding.
bool spin_between_tests(std::chrono::steady_clock::duration since_last_completion,
                        bool all_ranks_joined);

class MpiEngine {
 public:
  using Clock = std::chrono::steady_clock;

  /// The process's engine; the first call starts its thread, which initialises MPI with
  /// MPI_THREAD_MULTIPLE. Throws "[mpi] ..." when MPI provides a lower thread level (Tandem's
  /// thread and the caller's call MPI at once), and on every later call after that.
  static std::shared_ptr<MpiEngine> instance();
  /// Finalises MPI if the engine initialised it (Note [MPI lifetime]); joins the thread.
  ~MpiEngine();
  MpiEngine(const MpiEngine&) = delete;
  MpiEngine& operator=(const MpiEngine&) = delete;

  /// Whether MPI can read and write CUDA device memory (MPIX_Query_cuda_support(), asked at
  /// initialisation; false where Open MPI's CUDA extension is absent).
  bool cuda_aware() const { return cuda_aware_; }
  /// The largest tag MPI allows (MPI_TAG_UB, at least 32767).
  int tag_upper_bound() const { return tag_upper_bound_; }

  /// A new lane (Note [MPI lanes]); 0 is no lane.
  uint64_t new_lane();
  /// Queues `operation` on `lane` (0: starts at once) and wakes the thread. Never blocks.
  void submit(uint64_t lane, MpiOperation operation);
  /// Forgets `lane` once what it holds has run (a group is gone).
  void close_lane(uint64_t lane);
  /// Cancels the receives of the group with `lane` that are still pending (MPI_Cancel): their
  /// Works fail with "... did not complete: the group was destroyed first". A receive that a
  /// message has matched already completes normally.
  void cancel_receives(uint64_t lane);

  /// Runs `call` (a blocking MPI call such as MPI_Comm_dup) on the calling thread; if it has not
  /// returned after `timeout`, the engine's thread aborts the job naming `what` (Note [MPI
  /// timeouts]).
  void watch(const std::string& what, std::chrono::milliseconds timeout,
             const std::function<void()>& call);

 private:
  struct Lane {
    std::deque<MpiOperation> queued;
    bool running = false;  // its head is among active_
    bool closed = false;
  };
  struct Active {
    MpiOperation operation;
    uint64_t lane = 0;
    Clock::time_point deadline;
  };
  struct Watched {
    std::string what;
    Clock::time_point deadline;
    std::chrono::milliseconds timeout;
  };

  MpiEngine();
  void thread_main();
  /// MPI_Init_thread (unless the program did) and the queries; the thread's first act.
  void initialise();
  void finalise();
  /// Moves newly submitted operations to their lanes, and the operations that may start now
  /// (laneless ones, and lanes' heads) to active_. Under mutex_.
  void take_submissions();
  /// take_submissions() and the lanes to cancel receives of; when there is nothing to do, sleeps
  /// until there is, or until a watched call's deadline. False once stopping with nothing left.
  bool take_work(std::vector<uint64_t>& cancelling);
  /// Runs the first stages of the operations just taken (deadline unset); whether there were any.
  bool start_new();
  /// Runs stages of `active` until one posts requests that are still pending, or none is left.
  /// Returns whether the operation is over (its Work completed).
  bool advance(Active& active);
  /// Tests every active operation once; whether any moved on.
  bool test_all();
  /// MPI_Cancel on the pending receives of the lanes in `lanes`.
  void cancel(const std::vector<uint64_t>& lanes);
  void finish(Active& active, std::exception_ptr error);
  [[noreturn]] void abort_job(const std::string& what, std::chrono::milliseconds timeout);
  void check_deadlines();
  bool idle() const;  // under mutex_
  /// Whether an active operation has all its ranks in it (MpiOperation::all_ranks_joined).
  bool joined_operation_active() const;

  std::thread thread_;
  bool owns_mpi_ = false;  // initialised MPI, so finalises it
  bool cuda_aware_ = false;
  int tag_upper_bound_ = 32767;
  std::string init_error_;  // why initialisation failed; empty when it worked

  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable wake_;
  bool initialised_ = false;
  bool stopping_ = false;
  uint64_t lanes_made_ = 0;
  std::vector<std::pair<uint64_t, MpiOperation>> submitted_;
  std::map<uint64_t, Lane> lanes_;
  std::vector<uint64_t> cancelling_;  // lanes whose receives are to be cancelled
  std::list<Watched> watched_;

  std::list<Active> active_;  // the thread's only
};

/// MPI's message for an error code, e.g. "MPI_ERR_TRUNCATE: message truncated".
std::string mpi_error_string(int code);
/// Throws "[mpi] <what>: <MPI's message>" unless `code` is MPI_SUCCESS.
void check_mpi(int code, const std::string& what);

}  // namespace tandem::parallel
