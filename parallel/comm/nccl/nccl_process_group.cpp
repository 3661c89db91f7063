#include "parallel/comm/nccl/nccl_process_group.h"

#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/cuda_check.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/error.h"
#include "parallel/comm/nccl/nccl_api.h"
#include "parallel/comm/nccl/nccl_call.h"
#include "parallel/comm/nccl/nccl_work.h"
#include "parallel/comm/socket.h"

namespace tandem::parallel {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Note [NCCL watchdog]: how often pending collectives are polled. Also the resolution of
// Work::started_at()/ended_at() on NCCL.
constexpr auto kWatchdogPoll = std::chrono::milliseconds(1);

// Queues NCCL calls inside one ncclGroupStart/End on (comm, stream); returns the first failure.
using Collective = decltype(NcclCall::collective);

}  // namespace

struct NcclProcessGroup::State {
  explicit State(NcclApi& api) : nccl(api) {}

  NcclApi& nccl;
  int rank = 0;
  int size = 1;
  int device = 0;
  milliseconds timeout{0};       // a collective's, from when it is queued (the watchdog's)
  milliseconds init_timeout{0};  // set-up's: rendezvous, init, connections (Note [NCCL rendezvous])
  std::shared_ptr<Store> store;  // this group's keys (a PrefixStore)
  std::optional<cuda::Stream> stream;  // Note [NCCL stream order]

  std::mutex comm_mutex;      // guards comm and serialises every NCCL call on it
  ncclComm_t comm = nullptr;  // nullptr once aborted or destroyed

  std::mutex mutex;  // guards everything below
  std::condition_variable wake;
  std::deque<std::shared_ptr<NcclWork>> pending;  // queued on the device, in submission order
  std::string broken;                             // the first failure; non-empty once aborted
  bool stopping = false;
  uint64_t submitted = 0;  // collectives submitted so far, numbers them in messages

  std::thread watchdog;

  std::string where() const { return detail::concat("rank ", rank, " of ", size); }
  void check(ncclResult_t result) const {
    TANDEM_CHECK(result == ncclSuccess, nccl.message(result, comm));
  }
  void init_communicator(const ncclUniqueId& id);
  void finish_call(ncclResult_t result, milliseconds limit);
  ncclResult_t queue_in_group(const Collective& collective);
  std::shared_ptr<Work> launch(const std::string& op, const std::vector<Tensor>& used,
                               const NcclCall& call, bool host_blocking_wait);
  void watchdog_loop();
  std::string poll(const std::vector<std::shared_ptr<NcclWork>>& works, NcclWork*& culprit);
  void abort(const std::string& reason, NcclWork* culprit);
  void shut_down() noexcept;
};

// Note [NCCL rendezvous]: non-blocking, so a rank that never joins is a timeout, not a hang.
void NcclProcessGroup::State::init_communicator(const ncclUniqueId& id) {
  const cuda::DeviceGuard guard(device);  // NCCL binds the communicator to the current device
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclUniqueId unique_id = id;
  std::lock_guard lock(comm_mutex);
  try {
    finish_call(nccl.comm_init_rank_config(&comm, size, unique_id, rank, &config), init_timeout);
  } catch (const std::exception& e) {
    if (comm != nullptr) nccl.comm_abort(comm);
    comm = nullptr;
    TANDEM_FAIL("[nccl] creating the communicator failed on ", where(), " (cuda:", device,
                "): ", message_of(e));
  }
}

// With a non-blocking communicator a call may return ncclInProgress: it then goes on in the
// background and the communicator's state says when it is done. No other NCCL call may be made
// on the communicator until then (comm_mutex is held). Throws on an error or after `limit`.
void NcclProcessGroup::State::finish_call(ncclResult_t result, milliseconds limit) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = net::deadline_after(limit);
  while (result == ncclInProgress) {
    TANDEM_CHECK(Clock::now() < deadline, "NCCL did not finish within ",
                 net::format_duration(limit),
                 " (a peer may have died or hung, or not every rank joined)");
    pause_between_polls(start, std::chrono::milliseconds(1));
    ncclResult_t state = ncclInProgress;
    const ncclResult_t query = nccl.comm_get_async_error(comm, &state);
    result = query != ncclSuccess ? query : state;
  }
  check(result);
}

// Queues `collective` inside one ncclGroupStart/End on the group's stream (comm_mutex held) and
// returns what ncclGroupEnd did. The group is closed whatever queuing did, a throw included (a
// failed device copy): an open group would defer every later NCCL call of this thread into it,
// the abort too (review H5).
ncclResult_t NcclProcessGroup::State::queue_in_group(const Collective& collective) {
  check(nccl.group_start());
  ncclResult_t queued = ncclInternalError;
  std::exception_ptr thrown;
  try {
    queued = collective(nccl, comm, stream->handle());
  } catch (...) {
    thrown = std::current_exception();
  }
  const ncclResult_t ended = nccl.group_end();
  if (thrown) std::rethrow_exception(thrown);
  check(queued);
  return ended;
}

std::shared_ptr<Work> NcclProcessGroup::State::launch(const std::string& op,
                                                      const std::vector<Tensor>& used,
                                                      const NcclCall& call,
                                                      bool host_blocking_wait) {
  std::shared_ptr<NcclWork> work;
  {
    std::lock_guard lock(mutex);
    work = std::make_shared<NcclWork>(
        detail::concat("[nccl] ", op, " #", ++submitted, " on ", where()), timeout, device,
        host_blocking_wait);
    if (!broken.empty()) {
      work->mark_completed(std::make_exception_ptr(Error(detail::concat(
          "[nccl] ", op, " not run on ", where(),
          ": the communicator was aborted after an earlier failure (", broken, ")"))));
      return work;
    }
  }
  try {
    const cuda::DeviceGuard guard(device);
    const cudaStream_t caller = cuda::current_stream(device);
    std::lock_guard comm_lock(comm_mutex);
    TANDEM_CHECK(comm != nullptr, "the communicator was aborted");
    // Note [NCCL stream order]: after everything the caller queued so far...
    cuda::stream_wait_stream(stream->handle(), device, caller, device);
    // ... and no reuse of these tensors' memory before the collective has run.
    for (const Tensor& t : used) {
      if (t.numel() > 0) cuda::record_stream(t, stream->handle());
    }
    work->start_event().record(*stream);
    if (call.before) call.before(stream->handle());
    // In progress while NCCL connects to the peers: set-up (Note [NCCL rendezvous]).
    finish_call(queue_in_group(call.collective), init_timeout);
    if (call.after) call.after(stream->handle());
    work->end_event().record(*stream);
    work->set_recorded();
  } catch (const std::exception& e) {
    abort(detail::concat(work->description(), " failed: ", message_of(e)), work.get());
    return work;
  }
  {
    std::lock_guard lock(mutex);
    if (!broken.empty()) {
      // The watchdog aborted the communicator while this one was being queued.
      work->mark_completed(std::make_exception_ptr(Error(detail::concat(
          work->description(), " was aborted with the communicator (", broken, ")"))));
      return work;
    }
    pending.push_back(work);
  }
  wake.notify_all();
  return work;
}

// Note [NCCL watchdog]. Never throws: a failure of its own (a CUDA error from an event query)
// aborts the communicator like any other.
void NcclProcessGroup::State::watchdog_loop() {
  // A new thread's current device is 0: bound to the group's device once, its event queries and
  // DeviceGuards never make it create a context on another rank's GPU.
  try {
    cuda::set_device(device);
  } catch (const std::exception& e) {
    abort(detail::concat("[nccl] watchdog on ", where(), " failed: ", message_of(e)), nullptr);
  }
  std::unique_lock lock(mutex);
  while (true) {
    if (pending.empty()) {
      if (stopping) return;
      wake.wait(lock, [&] { return stopping || !pending.empty(); });
      continue;
    }
    const std::vector<std::shared_ptr<NcclWork>> works(pending.begin(), pending.end());
    lock.unlock();
    NcclWork* culprit = nullptr;
    std::string failure;
    try {
      failure = poll(works, culprit);
    } catch (const std::exception& e) {
      failure = detail::concat("[nccl] watchdog on ", where(), " failed: ", message_of(e));
    }
    if (!failure.empty()) abort(failure, culprit);
    lock.lock();
    std::erase_if(pending, [](const std::shared_ptr<NcclWork>& w) { return w->Work::completed(); });
    if (!pending.empty()) wake.wait_for(lock, kWatchdogPoll);
  }
}

// Finishes the Works whose end event completed; returns why the communicator must be aborted
// ("" when it need not be), pointing `culprit` at the Work to blame.
std::string NcclProcessGroup::State::poll(const std::vector<std::shared_ptr<NcclWork>>& works,
                                          NcclWork*& culprit) {
  const Clock::time_point now = Clock::now();
  for (const std::shared_ptr<NcclWork>& work : works) {
    if (!work->start_seen && work->start_event().query()) {
      work->mark_started();  // host time at which the device was seen to reach it
      work->start_seen = true;
    }
    if (work->end_event().query()) {
      work->mark_completed();  // ignored when abort() failed it first
      continue;
    }
    if (now - work->queued_at() > timeout) {
      culprit = work.get();
      return detail::concat(work->description(), " did not complete within ",
                            net::format_duration(timeout),
                            " (a peer may have died or hung, or the ranks issued different "
                            "collectives)");
    }
  }
  // A peer that died or a network error shows up here long before the timeout.
  ncclResult_t state = ncclSuccess;
  {
    std::unique_lock comm_lock(comm_mutex, std::try_to_lock);  // busy: look next time
    if (comm_lock.owns_lock() && comm != nullptr) nccl.comm_get_async_error(comm, &state);
    if (state != ncclSuccess && state != ncclInProgress) {
      const std::string message = nccl.message(state, comm);
      for (const std::shared_ptr<NcclWork>& work : works) {
        if (work->Work::completed()) continue;
        culprit = work.get();
        return detail::concat(work->description(), " failed: ", message);
      }
      return detail::concat("[nccl] the communicator on ", where(), " failed: ", message);
    }
  }
  return "";
}

// Fails `culprit` (the Work to blame; pending or not) and every pending Work, then aborts the
// communicator, in this order: see NcclWork::completed(). The first failure is what the group
// remembers; a Work already completed keeps its result (Work::mark_completed: first call wins).
void NcclProcessGroup::State::abort(const std::string& reason, NcclWork* culprit) {
  std::deque<std::shared_ptr<NcclWork>> failed;
  std::string first;
  {
    std::lock_guard lock(mutex);
    if (broken.empty()) broken = reason;
    first = broken;
    failed.swap(pending);
  }
  if (culprit != nullptr) {
    culprit->mark_completed(
        std::make_exception_ptr(Error(reason + "; the communicator was aborted")));
  }
  for (const std::shared_ptr<NcclWork>& work : failed) {
    work->mark_completed(std::make_exception_ptr(Error(
        detail::concat(work->description(), " was aborted with the communicator (", first, ")"))));
  }
  std::lock_guard comm_lock(comm_mutex);
  if (comm != nullptr) {
    const cuda::DeviceGuard guard(device);
    nccl.comm_abort(comm);  // also ends the NCCL kernels still waiting on the device
    comm = nullptr;
  }
}

// Waits for the pending collectives (the watchdog fails them at their timeout), then finalises
// and destroys the communicator: ncclCommFinalize flushes its operations, bounded by the
// timeout; whatever does not finish is aborted instead.
void NcclProcessGroup::State::shut_down() noexcept {
  {
    std::lock_guard lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  if (watchdog.joinable()) watchdog.join();
  std::lock_guard comm_lock(comm_mutex);
  if (comm == nullptr) return;
  try {
    const cuda::DeviceGuard guard(device);
    finish_call(nccl.comm_finalize(comm), timeout);
    nccl.comm_destroy(comm);
  } catch (...) {
    nccl.comm_abort(comm);
  }
  comm = nullptr;
}

// --- NcclProcessGroup

NcclProcessGroup::NcclProcessGroup(const std::shared_ptr<Store>& store, int rank, int size,
                                   int device, ProcessGroupOptions options, NcclApi& nccl)
    : NcclProcessGroup(MeetingStore{store}, rank, size, device, std::move(options), nccl) {}

NcclProcessGroup::NcclProcessGroup(const MeetingStore& meeting, int rank, int size, int device,
                                   ProcessGroupOptions options, NcclApi& nccl)
    : ProcessGroup(rank, size, std::move(options)), state_(std::make_unique<State>(nccl)) {
  const std::shared_ptr<Store>& store = meeting.store;
  TANDEM_CHECK(store != nullptr, "[nccl] NcclProcessGroup needs a store");
  check_nccl_device(rank, device);
  int version = 0;
  nccl.get_version(&version);
  check_nccl_version(version, NCCL_VERSION_CODE);
  State& s = *state_;
  s.rank = rank;
  s.size = size;
  s.device = device;
  s.timeout = this->options().timeout;
  s.init_timeout =
      this->options().init_timeout.count() > 0 ? this->options().init_timeout : s.timeout;
  s.stream = cuda::Stream::create(device);

  // Note [NCCL rendezvous]: the k-th group of every rank meets under the same prefix.
  ncclUniqueId id{};
  try {
    if (meeting.scoped) {
      s.store = store;
    } else {
      const int64_t generation = store->add("nccl/groups_of_rank" + std::to_string(rank), 1);
      s.store = std::make_shared<PrefixStore>("nccl/" + std::to_string(generation) + "/", store);
    }
    if (rank == 0) {
      s.check(s.nccl.get_unique_id(&id));
      const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
      s.store->set("unique_id", Bytes(bytes, bytes + sizeof(id)));
    } else {
      const Bytes bytes = s.store->get("unique_id", s.init_timeout);
      TANDEM_CHECK(bytes.size() == sizeof(id), "the NCCL id in the store has ", bytes.size(),
                   " bytes, expected ", sizeof(id), " (a different NCCL version on rank 0?)");
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
  } catch (const std::exception& e) {
    TANDEM_FAIL("[nccl] rendezvous failed on rank ", rank, " of ", size, ": ", message_of(e));
  }
  s.init_communicator(id);
  s.watchdog = std::thread([&s] { s.watchdog_loop(); });
}

NcclProcessGroup::~NcclProcessGroup() {
  state_->shut_down();
}

Device NcclProcessGroup::tensor_device() const {
  return Device::cuda(state_->device);
}

std::shared_ptr<Work> NcclProcessGroup::launch(const std::string& op,
                                               const std::vector<Tensor>& used,
                                               const NcclCall& call, bool host_blocking_wait) {
  return state_->launch(op, used, call, host_blocking_wait);
}

// A communicator of its own, met through the parent's store (the parent's keys are this
// group's keys): see the sub-groups in nccl_process_group.h.
std::shared_ptr<ProcessGroup> NcclProcessGroup::make_subgroup(int index, int rank, int size,
                                                              const std::vector<int>&) {
  auto store = std::make_shared<PrefixStore>("sub" + std::to_string(index) + "/", state_->store);
  return std::shared_ptr<NcclProcessGroup>(
      new NcclProcessGroup(MeetingStore{std::move(store), /*scoped=*/true}, rank, size,
                           state_->device, options(), state_->nccl));
}

void NcclProcessGroup::check_placement(const std::string& op, size_t index,
                                       const Tensor& tensor) const {
  check_nccl_placement(op, index, tensor, tensor_device());
}

}  // namespace tandem::parallel
