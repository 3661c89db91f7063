#include "tests/parallel/comm/fake_nccl/fake_nccl.h"

#include <algorithm>
#include <utility>

namespace tandem::parallel::testing {

void FakeNccl::script(Call call, Outcome outcome) {
  std::lock_guard lock(mutex_);
  script_.emplace_back(call, outcome);
}

void FakeNccl::fail_async(ncclResult_t error, const std::string& detail) {
  std::lock_guard lock(mutex_);
  async_error_ = error;
  detail_ = detail;
}

void FakeNccl::on_abort(std::function<void()> hook) {
  std::lock_guard lock(mutex_);
  on_abort_ = std::move(hook);
}

void FakeNccl::on_poll(std::function<void()> hook) {
  std::lock_guard lock(mutex_);
  on_poll_ = std::move(hook);
}

void FakeNccl::set_version(int version) {
  std::lock_guard lock(mutex_);
  version_ = version;
}

std::vector<std::string> FakeNccl::calls() const {
  std::lock_guard lock(mutex_);
  return calls_;
}

int FakeNccl::count(const std::string& call) const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(std::count(calls_.begin(), calls_.end(), call));
}

std::vector<std::string> FakeNccl::misuse() const {
  std::lock_guard lock(mutex_);
  return misuse_;
}

int FakeNccl::polls() const {
  std::lock_guard lock(mutex_);
  return polls_;
}

// NCCL's rules for a non-blocking communicator (mutex_ held).
void FakeNccl::record(const std::string& call, ncclComm_t comm, bool allowed_in_progress) {
  if (call != "comm_get_async_error") calls_.push_back(call);
  if (comm == nullptr) return;
  if (comm != reinterpret_cast<ncclComm_t>(&comm_token_)) {
    misuse_.push_back(call + " on a communicator this fake never made");
  } else if (ended_) {
    misuse_.push_back(call + " after the communicator was aborted or destroyed");
  } else if (pending_.active && !allowed_in_progress) {
    misuse_.push_back(call + " while a non-blocking call was in progress");
  }
}

// The next scripted outcome of `call`: ncclInProgress, or its result at once (mutex_ held).
ncclResult_t FakeNccl::start(Call call) {
  Outcome outcome;
  const auto it = std::find_if(script_.begin(), script_.end(),
                               [&](const auto& entry) { return entry.first == call; });
  if (it != script_.end()) {
    outcome = it->second;
    script_.erase(it);
  }
  if (outcome.in_progress_polls == 0) return outcome.result;
  pending_ = {.active = true, .outcome = outcome};
  return ncclInProgress;
}

ncclResult_t FakeNccl::get_unique_id(ncclUniqueId* id) {
  std::lock_guard lock(mutex_);
  record("get_unique_id", nullptr, false);
  *id = ncclUniqueId{};
  return ncclSuccess;
}

ncclResult_t FakeNccl::comm_init_rank_config(ncclComm_t* comm, int, ncclUniqueId, int,
                                             ncclConfig_t* config) {
  std::lock_guard lock(mutex_);
  record("comm_init_rank_config", nullptr, false);
  if (config->blocking != 0) misuse_.push_back("a blocking communicator was asked for");
  if (created_) misuse_.push_back("a second communicator was created");
  created_ = true;
  *comm = reinterpret_cast<ncclComm_t>(&comm_token_);
  return start(Call::Init);
}

ncclResult_t FakeNccl::all_reduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                  ncclComm_t comm, cudaStream_t) {
  std::lock_guard lock(mutex_);
  record("all_reduce", comm, false);
  return ncclSuccess;
}

ncclResult_t FakeNccl::broadcast(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t comm,
                                 cudaStream_t) {
  std::lock_guard lock(mutex_);
  record("broadcast", comm, false);
  return ncclSuccess;
}

ncclResult_t FakeNccl::all_gather(const void*, void*, size_t, ncclDataType_t, ncclComm_t comm,
                                  cudaStream_t) {
  std::lock_guard lock(mutex_);
  record("all_gather", comm, false);
  return ncclSuccess;
}

ncclResult_t FakeNccl::group_start() {
  std::lock_guard lock(mutex_);
  record("group_start", nullptr, false);
  if (pending_.active) misuse_.push_back("group_start while a non-blocking call was in progress");
  return ncclSuccess;
}

ncclResult_t FakeNccl::group_end() {
  std::lock_guard lock(mutex_);
  record("group_end", nullptr, false);
  if (!created_ || ended_) misuse_.push_back("group_end without a live communicator");
  return start(Call::GroupEnd);
}

ncclResult_t FakeNccl::comm_get_async_error(ncclComm_t comm, ncclResult_t* state) {
  std::function<void()> hook;
  {
    std::lock_guard lock(mutex_);
    hook = on_poll_;
  }
  if (hook) hook();
  std::lock_guard lock(mutex_);
  record("comm_get_async_error", comm, true);
  ++polls_;
  if (async_error_ != ncclSuccess) {
    *state = async_error_;
  } else if (!pending_.active) {
    *state = ncclSuccess;
  } else if (pending_.outcome.in_progress_polls == kNever ||
             pending_.outcome.in_progress_polls-- > 0) {
    *state = ncclInProgress;
  } else {
    *state = pending_.outcome.result;
    pending_.active = false;
  }
  return ncclSuccess;
}

ncclResult_t FakeNccl::comm_abort(ncclComm_t comm) {
  std::function<void()> hook;
  {
    std::lock_guard lock(mutex_);
    hook = on_abort_;
  }
  if (hook) hook();
  std::lock_guard lock(mutex_);
  record("comm_abort", comm, true);
  ended_ = true;
  pending_.active = false;
  return ncclSuccess;
}

ncclResult_t FakeNccl::comm_finalize(ncclComm_t comm) {
  std::lock_guard lock(mutex_);
  record("comm_finalize", comm, false);
  return start(Call::Finalize);
}

ncclResult_t FakeNccl::comm_destroy(ncclComm_t comm) {
  std::lock_guard lock(mutex_);
  record("comm_destroy", comm, false);
  ended_ = true;
  return ncclSuccess;
}

// NCCL 2.28's strings for the results the tests use.
const char* FakeNccl::error_string(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

// The string lives as long as the fake, as NCCL's lives until the next error.
const char* FakeNccl::last_error(ncclComm_t) {
  std::lock_guard lock(mutex_);
  return detail_.c_str();
}

ncclResult_t FakeNccl::get_version(int* version) {
  std::lock_guard lock(mutex_);
  *version = version_;
  return ncclSuccess;
}

}  // namespace tandem::parallel::testing
