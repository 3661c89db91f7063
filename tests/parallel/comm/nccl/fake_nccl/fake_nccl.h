#pragma once
/// FakeNccl: a scripted NcclApi for the NCCL process group's state machine on CPUs (no libnccl,
/// no GPU). Each non-blocking call (communicator creation, ncclGroupEnd, ncclCommFinalize) takes
/// the next Outcome scripted for it, default: immediate success. An Outcome returns
/// ncclInProgress and then reports `result` through comm_get_async_error() after
/// `in_progress_polls` polls, or never (kNever). fail_async() makes every later
/// comm_get_async_error() report an error, as NCCL does when a peer dies mid-collective. Every
/// call is traced (comm_get_async_error only counted: polls()), and NCCL's rules are checked as
/// the calls come: a non-blocking communicator; no call but comm_get_async_error/comm_abort
/// while a non-blocking call is in progress; none on a communicator after its abort or destroy
/// (so one abort or destroy at most). Several communicators may be made (a group and its
/// sub-groups): each has its own abort, destroy and in-progress state, and a group's calls
/// belong to the communicator its collectives name (the newest one when they name none). The
/// collectives and point-to-point calls are also traced with their arguments (operations()),
/// and grouped as NCCL groups them (groups()): ncclGroupStart/End nest per thread, as NCCL's
/// do, and each outermost group is recorded with its calls and the stream of each, so a test
/// can see which calls NCCL would progress together (review H2). A group_end without its start,
/// a group left open (misuse() reports it) and a communicator made, finalised, destroyed or
/// aborted inside an open group (NCCL would defer the call to the group's end: review H5) are
/// misuse too. The kernels that the group queues around its NCCL calls are traced too, through
/// the fake launchers of fake_kernels.cpp (kernel()): a kernel queued while the thread has a
/// group open is misuse (NCCL queues a group's calls at its end, so the kernel would run first).
/// Thread-safe.

#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "parallel/comm/nccl/nccl_api.h"

namespace tandem::parallel::testing {

class FakeNccl final : public NcclApi {
 public:
  static constexpr int kNever = -1;
  struct Outcome {
    int in_progress_polls = 0;  ///< polls answered ncclInProgress; 0: the call returns `result`
    ncclResult_t result = ncclSuccess;
  };
  enum class Call { Init, GroupEnd, Finalize };
  /// One outermost ncclGroupStart/End (or a data call made outside any group, NCCL's implicit
  /// group of one): its data calls as operations() words them, and the stream of each.
  struct Group {
    std::vector<std::string> operations;
    std::vector<cudaStream_t> streams;
  };

  /// The outcome of the next `call` not yet scripted (calls without one succeed at once).
  void script(Call call, Outcome outcome);
  /// From now on the communicator reports `error` (with `detail` as NCCL's last error).
  void fail_async(ncclResult_t error, const std::string& detail);
  /// Runs on the aborting thread inside comm_abort(), before the fake records it.
  void on_abort(std::function<void()> hook);
  /// Runs on the polling thread inside comm_get_async_error(), before the fake answers: a test
  /// can hold the watchdog there.
  void on_poll(std::function<void()> hook);
  void set_version(int version);

  /// The calls so far, by name ("comm_init_rank_config", "group_end", "comm_abort", ...).
  std::vector<std::string> calls() const;
  int count(const std::string& call) const;
  /// Broken NCCL rules, one line each; empty when none was.
  std::vector<std::string> misuse() const;
  /// comm_get_async_error() calls so far (polls of an in-progress call and the watchdog's).
  int polls() const;
  /// The data calls so far with their arguments, e.g. "all_reduce 8 float32 sum on comm 0",
  /// "send 3 int64 to 1 on comm 1", "reduce 4 bfloat16 max root 1 on comm 0"; comm k is the
  /// k-th communicator made.
  std::vector<std::string> operations() const;
  /// The buffers of each entry of operations(), in the same order: (send, recv) of a
  /// collective, (buffer, null) of a send, (null, buffer) of a receive, (in, out) of a kernel.
  struct Buffers {
    const void* in = nullptr;
    const void* out = nullptr;
  };
  std::vector<Buffers> buffers() const;
  /// The streams of the kernels in operations(), in order.
  std::vector<cudaStream_t> kernel_streams() const;
  /// A kernel queued on `stream` by the code under test, reading `in` and writing `out`: traced
  /// in operations() as "kernel <what>" (the fake launchers call it).
  void kernel(const std::string& what, const void* in, const void* out, cudaStream_t stream);
  /// Communicators made so far.
  int communicators() const;
  /// The groups ended so far, in the order of their outermost group_end().
  std::vector<Group> groups() const;

  ncclResult_t get_unique_id(ncclUniqueId* id) override;
  ncclResult_t comm_init_rank_config(ncclComm_t* comm, int size, ncclUniqueId id, int rank,
                                     ncclConfig_t* config) override;
  ncclResult_t all_reduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                          ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) override;
  ncclResult_t broadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                         ncclComm_t comm, cudaStream_t stream) override;
  ncclResult_t all_gather(const void* send, void* recv, size_t count, ncclDataType_t type,
                          ncclComm_t comm, cudaStream_t stream) override;
  ncclResult_t reduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                      ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) override;
  ncclResult_t reduce_scatter(const void* send, void* recv, size_t count, ncclDataType_t type,
                              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) override;
  ncclResult_t send(const void* buffer, size_t count, ncclDataType_t type, int peer,
                    ncclComm_t comm, cudaStream_t stream) override;
  ncclResult_t recv(void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                    cudaStream_t stream) override;
  ncclResult_t group_start() override;
  ncclResult_t group_end() override;
  ncclResult_t comm_get_async_error(ncclComm_t comm, ncclResult_t* state) override;
  ncclResult_t comm_abort(ncclComm_t comm) override;
  ncclResult_t comm_finalize(ncclComm_t comm) override;
  ncclResult_t comm_destroy(ncclComm_t comm) override;
  const char* error_string(ncclResult_t result) override;
  const char* last_error(ncclComm_t comm) override;
  ncclResult_t get_version(int* version) override;

 private:
  struct Pending {
    bool active = false;
    Outcome outcome;
  };
  struct Comm {
    bool ended = false;  // aborted or destroyed
    Pending pending;     // its non-blocking call in progress
  };
  ncclResult_t start(Call call, Comm* comm);  // the non-blocking calls (mutex_ held)
  void record(const std::string& call, ncclComm_t comm, bool allowed_in_progress);
  // A data call: traced with `detail`, and its communicator becomes the group's (mutex_ held).
  ncclResult_t operation(const std::string& call, const std::string& detail, Buffers buffers,
                         ncclComm_t comm, cudaStream_t stream);
  // Misuse when the calling thread has a group open (mutex_ held).
  void outside_groups(const std::string& call);
  Comm* find(ncclComm_t comm);  // nullptr for one this fake never made (mutex_ held)

  mutable std::mutex mutex_;  // guards everything below
  std::vector<std::pair<Call, Outcome>> script_;
  std::vector<std::string> calls_;
  std::vector<std::string> operations_;
  std::vector<Buffers> buffers_;  // one per operations_ entry
  std::vector<cudaStream_t> kernel_streams_;
  std::vector<std::string> misuse_;
  std::deque<Comm> comms_;      // their addresses are the fake communicators
  Comm* group_comm_ = nullptr;  // named by the open group's collectives
  struct OpenGroup {
    int depth = 0;  // group_start()s not yet ended on the thread
    Group group;
  };
  std::map<std::thread::id, OpenGroup> open_;  // per thread, as NCCL keeps them
  std::vector<Group> groups_;
  ncclResult_t async_error_ = ncclSuccess;
  std::string detail_;
  std::function<void()> on_abort_;
  std::function<void()> on_poll_;
  int version_ = NCCL_VERSION_CODE;
  int polls_ = 0;
};

/// From now on the fake kernel launchers (fake_kernels.cpp) trace their launches in `nccl`
/// (nullptr: in none).
void trace_kernels_in(FakeNccl* nccl);

}  // namespace tandem::parallel::testing
