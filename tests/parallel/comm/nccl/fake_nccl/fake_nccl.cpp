#include "tests/parallel/comm/nccl/fake_nccl/fake_nccl.h"

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
  std::vector<std::string> misuse = misuse_;
  for (const auto& [thread, open] : open_) {
    if (open.depth > 0) {
      misuse.push_back("a group left open (" + std::to_string(open.group.operations.size()) +
                       " calls queued in it)");
    }
  }
  return misuse;
}

std::vector<FakeNccl::Group> FakeNccl::groups() const {
  std::lock_guard lock(mutex_);
  return groups_;
}

void FakeNccl::outside_groups(const std::string& call) {
  const auto it = open_.find(std::this_thread::get_id());
  if (it != open_.end() && it->second.depth > 0) {
    misuse_.push_back(call + " inside an open group (NCCL defers it to the group's end)");
  }
}

int FakeNccl::polls() const {
  std::lock_guard lock(mutex_);
  return polls_;
}

std::vector<std::string> FakeNccl::operations() const {
  std::lock_guard lock(mutex_);
  return operations_;
}

std::vector<FakeNccl::Buffers> FakeNccl::buffers() const {
  std::lock_guard lock(mutex_);
  return buffers_;
}

std::vector<cudaStream_t> FakeNccl::kernel_streams() const {
  std::lock_guard lock(mutex_);
  return kernel_streams_;
}

void FakeNccl::kernel(const std::string& what, const void* in, const void* out,
                      cudaStream_t stream) {
  std::lock_guard lock(mutex_);
  const auto it = open_.find(std::this_thread::get_id());
  if (it != open_.end() && it->second.depth > 0) {
    misuse_.push_back("kernel " + what +
                      " queued inside an open group (it would run before the group's calls)");
  }
  operations_.push_back("kernel " + what);
  buffers_.push_back({in, out});
  kernel_streams_.push_back(stream);
}

int FakeNccl::communicators() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(comms_.size());
}

FakeNccl::Comm* FakeNccl::find(ncclComm_t comm) {
  for (Comm& c : comms_) {
    if (reinterpret_cast<ncclComm_t>(&c) == comm) return &c;
  }
  return nullptr;
}

// NCCL's rules for a non-blocking communicator (mutex_ held).
void FakeNccl::record(const std::string& call, ncclComm_t comm, bool allowed_in_progress) {
  if (call != "comm_get_async_error") calls_.push_back(call);
  if (comm == nullptr) return;
  const Comm* c = find(comm);
  if (c == nullptr) {
    misuse_.push_back(call + " on a communicator this fake never made");
  } else if (c->ended) {
    misuse_.push_back(call + " after the communicator was aborted or destroyed");
  } else if (c->pending.active && !allowed_in_progress) {
    misuse_.push_back(call + " while a non-blocking call was in progress");
  }
}

// The next scripted outcome of `call`: ncclInProgress, or its result at once (mutex_ held).
ncclResult_t FakeNccl::start(Call call, Comm* comm) {
  Outcome outcome;
  const auto it = std::find_if(script_.begin(), script_.end(),
                               [&](const auto& entry) { return entry.first == call; });
  if (it != script_.end()) {
    outcome = it->second;
    script_.erase(it);
  }
  if (outcome.in_progress_polls == 0) return outcome.result;
  comm->pending = {.active = true, .outcome = outcome};
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
  outside_groups("comm_init_rank_config");
  if (config->blocking != 0) misuse_.push_back("a blocking communicator was asked for");
  Comm& made = comms_.emplace_back();
  *comm = reinterpret_cast<ncclComm_t>(&made);
  return start(Call::Init, &made);
}

namespace {

std::string type_name(ncclDataType_t type) {
  switch (type) {
    case ncclFloat32: return "float32";
    case ncclInt64: return "int64";
    case ncclUint8: return "uint8";
    case ncclUint32: return "uint32";
    case ncclBfloat16: return "bfloat16";
    case ncclFloat16: return "float16";
    default: return "type" + std::to_string(static_cast<int>(type));
  }
}

std::string op_name(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "product";
    case ncclMin: return "min";
    case ncclMax: return "max";
    case ncclAvg: return "avg";
    default: return "op" + std::to_string(static_cast<int>(op));
  }
}

std::string elements(size_t count, ncclDataType_t type) {
  return std::to_string(count) + " " + type_name(type);
}

}  // namespace

ncclResult_t FakeNccl::operation(const std::string& call, const std::string& detail,
                                 Buffers buffers, ncclComm_t comm, cudaStream_t stream) {
  record(call, comm, false);
  Comm* c = find(comm);
  if (c != nullptr) group_comm_ = c;
  // A deque's elements are not contiguous: count instead of subtracting addresses.
  int number = 0;
  for (const Comm& each : comms_) {
    if (&each == c) break;
    ++number;
  }
  operations_.push_back(call + " " + detail + " on comm " + std::to_string(number));
  buffers_.push_back(buffers);
  OpenGroup& open = open_[std::this_thread::get_id()];
  if (open.depth > 0) {
    open.group.operations.push_back(operations_.back());
    open.group.streams.push_back(stream);
  } else {
    groups_.push_back({.operations = {operations_.back()}, .streams = {stream}});
  }
  return ncclSuccess;
}

ncclResult_t FakeNccl::all_reduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                                  ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  std::lock_guard lock(mutex_);
  return operation("all_reduce", elements(count, type) + " " + op_name(op), {send, recv}, comm,
                   stream);
}

ncclResult_t FakeNccl::broadcast(const void* send, void* recv, size_t count, ncclDataType_t type,
                                 int root, ncclComm_t comm, cudaStream_t stream) {
  std::lock_guard lock(mutex_);
  return operation("broadcast", elements(count, type) + " root " + std::to_string(root),
                   {send, recv}, comm, stream);
}

ncclResult_t FakeNccl::all_gather(const void* send, void* recv, size_t count, ncclDataType_t type,
                                  ncclComm_t comm, cudaStream_t stream) {
  std::lock_guard lock(mutex_);
  return operation("all_gather", elements(count, type), {send, recv}, comm, stream);
}

ncclResult_t FakeNccl::reduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                              ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  std::lock_guard lock(mutex_);
  return operation("reduce",
                   elements(count, type) + " " + op_name(op) + " root " + std::to_string(root),
                   {send, recv}, comm, stream);
}

ncclResult_t FakeNccl::reduce_scatter(const void* send, void* recv, size_t count,
                                      ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream) {
  std::lock_guard lock(mutex_);
  return operation("reduce_scatter", elements(count, type) + " " + op_name(op), {send, recv}, comm,
                   stream);
}

ncclResult_t FakeNccl::send(const void* buffer, size_t count, ncclDataType_t type, int peer,
                            ncclComm_t comm, cudaStream_t stream) {
  std::lock_guard lock(mutex_);
  return operation("send", elements(count, type) + " to " + std::to_string(peer), {buffer, nullptr},
                   comm, stream);
}

ncclResult_t FakeNccl::recv(void* buffer, size_t count, ncclDataType_t type, int peer,
                            ncclComm_t comm, cudaStream_t stream) {
  std::lock_guard lock(mutex_);
  return operation("recv", elements(count, type) + " from " + std::to_string(peer),
                   {nullptr, buffer}, comm, stream);
}

ncclResult_t FakeNccl::group_start() {
  std::lock_guard lock(mutex_);
  record("group_start", nullptr, false);
  for (const Comm& c : comms_) {
    if (c.pending.active)
      misuse_.push_back("group_start while a non-blocking call was in progress");
  }
  OpenGroup& open = open_[std::this_thread::get_id()];
  if (open.depth++ == 0) {
    open.group = {};
    group_comm_ = nullptr;
  }
  return ncclSuccess;
}

ncclResult_t FakeNccl::group_end() {
  std::lock_guard lock(mutex_);
  record("group_end", nullptr, false);
  OpenGroup& open = open_[std::this_thread::get_id()];
  if (open.depth == 0) {
    misuse_.push_back("group_end without a group_start");
    return ncclInvalidUsage;
  }
  if (--open.depth > 0) return ncclSuccess;  // an inner group: NCCL acts at the outermost end
  groups_.push_back(std::move(open.group));
  open.group = {};
  // A group without data calls (an empty collective) belongs to the newest communicator.
  Comm* comm = group_comm_ != nullptr ? group_comm_ : (comms_.empty() ? nullptr : &comms_.back());
  if (comm == nullptr || comm->ended) {
    misuse_.push_back("group_end without a live communicator");
    return ncclSuccess;
  }
  return start(Call::GroupEnd, comm);
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
  Comm* c = find(comm);
  if (async_error_ != ncclSuccess) {
    *state = async_error_;
  } else if (c == nullptr || !c->pending.active) {
    *state = ncclSuccess;
  } else if (c->pending.outcome.in_progress_polls == kNever ||
             c->pending.outcome.in_progress_polls-- > 0) {
    *state = ncclInProgress;
  } else {
    *state = c->pending.outcome.result;
    c->pending.active = false;
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
  outside_groups("comm_abort");
  if (Comm* c = find(comm)) {
    c->ended = true;
    c->pending.active = false;
  }
  return ncclSuccess;
}

ncclResult_t FakeNccl::comm_finalize(ncclComm_t comm) {
  std::lock_guard lock(mutex_);
  record("comm_finalize", comm, false);
  outside_groups("comm_finalize");
  Comm* c = find(comm);
  return c == nullptr ? ncclInvalidArgument : start(Call::Finalize, c);
}

ncclResult_t FakeNccl::comm_destroy(ncclComm_t comm) {
  std::lock_guard lock(mutex_);
  record("comm_destroy", comm, false);
  outside_groups("comm_destroy");
  if (Comm* c = find(comm)) c->ended = true;
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
