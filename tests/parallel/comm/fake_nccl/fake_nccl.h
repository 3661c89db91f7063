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
/// (so one abort or destroy at most). Thread-safe.

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "parallel/comm/nccl_api.h"

namespace tandem::parallel::testing {

class FakeNccl final : public NcclApi {
 public:
  static constexpr int kNever = -1;
  struct Outcome {
    int in_progress_polls = 0;  ///< polls answered ncclInProgress; 0: the call returns `result`
    ncclResult_t result = ncclSuccess;
  };
  enum class Call { Init, GroupEnd, Finalize };

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

  ncclResult_t get_unique_id(ncclUniqueId* id) override;
  ncclResult_t comm_init_rank_config(ncclComm_t* comm, int size, ncclUniqueId id, int rank,
                                     ncclConfig_t* config) override;
  ncclResult_t all_reduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                          ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) override;
  ncclResult_t broadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                         ncclComm_t comm, cudaStream_t stream) override;
  ncclResult_t all_gather(const void* send, void* recv, size_t count, ncclDataType_t type,
                          ncclComm_t comm, cudaStream_t stream) override;
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
  ncclResult_t start(Call call);  // the non-blocking calls (mutex_ held)
  void record(const std::string& call, ncclComm_t comm, bool allowed_in_progress);

  mutable std::mutex mutex_;  // guards everything below
  std::vector<std::pair<Call, Outcome>> script_;
  std::vector<std::string> calls_;
  std::vector<std::string> misuse_;
  Pending pending_;
  ncclResult_t async_error_ = ncclSuccess;
  std::string detail_;
  std::function<void()> on_abort_;
  std::function<void()> on_poll_;
  int version_ = NCCL_VERSION_CODE;
  int polls_ = 0;
  bool created_ = false;
  bool ended_ = false;  // aborted or destroyed
  int comm_token_ = 0;  // its address is the fake communicator
};

}  // namespace tandem::parallel::testing
