#include "engine/cuda/runtime/stream.h"

#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/cuda_check.h"
#include "engine/cuda/runtime/device.h"

namespace tandem::cuda {
namespace {

// The current stream of each device for this thread; nullptr is the legacy default stream.
std::vector<cudaStream_t>& thread_streams() {
  thread_local std::vector<cudaStream_t> streams;
  return streams;
}

// Note [Stream ids]: the ids of the live streams by handle.
struct StreamRegistry {
  std::shared_mutex mutex;
  std::unordered_map<cudaStream_t, StreamInfo> streams;
  uint64_t next_id = 1;
};

StreamRegistry& stream_registry() {
  static auto* registry = new StreamRegistry;  // Note [Leaked singletons]
  return *registry;
}

StreamInfo register_stream(cudaStream_t handle, int device) {
  StreamRegistry& registry = stream_registry();
  std::unique_lock lock(registry.mutex);
  const StreamInfo info{registry.next_id++, device};
  registry.streams[handle] = info;  // replaces an earlier stream's entry for a reused handle
  return info;
}

void forget_stream(cudaStream_t handle, uint64_t id) noexcept {
  StreamRegistry& registry = stream_registry();
  std::unique_lock lock(registry.mutex);
  const auto it = registry.streams.find(handle);
  if (it != registry.streams.end() && it->second.id == id) registry.streams.erase(it);
}

// The on_stream_retired() listeners.
struct RetirementListeners {
  std::mutex mutex;
  std::vector<StreamRetired> listeners;
};

RetirementListeners& retirement_listeners() {
  static auto* listeners = new RetirementListeners;  // Note [Leaked singletons]
  return *listeners;
}

void notify_retired(int device, uint64_t id) noexcept {
  RetirementListeners& all = retirement_listeners();
  std::lock_guard lock(all.mutex);
  for (const StreamRetired listener : all.listeners) listener(device, id);
}

// Note [Event pool]: free events per device.
struct EventPool {
  std::mutex mutex;
  std::vector<std::vector<cudaEvent_t>> free;
};

EventPool& event_pool() {
  static auto* pool = new EventPool;  // Note [Leaked singletons]
  return *pool;
}

}  // namespace

bool is_default_stream(cudaStream_t stream) {
  return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
}

StreamInfo stream_info(cudaStream_t stream, int device) {
  if (is_default_stream(stream)) return {0, device};
  StreamRegistry& registry = stream_registry();
  std::shared_lock lock(registry.mutex);
  const auto it = registry.streams.find(stream);
  // A stream made elsewhere would have to be remembered forever (nothing tells when it is
  // destroyed and its handle reused) and its device guessed: it is refused instead.
  TANDEM_CHECK(it != registry.streams.end(), "[cuda stream] stream ",
               static_cast<const void*>(stream),
               " was not made by Stream::create (or is destroyed): the allocators know streams "
               "by ids that only Stream::create gives (Note [Stream ids])");
  return it->second;
}

void on_stream_retired(StreamRetired listener) {
  RetirementListeners& all = retirement_listeners();
  std::lock_guard lock(all.mutex);
  all.listeners.push_back(listener);
}

cudaEvent_t acquire_event(int device) {
  EventPool& pool = event_pool();
  {
    std::lock_guard lock(pool.mutex);
    if (static_cast<size_t>(device) < pool.free.size()) {
      auto& free = pool.free[static_cast<size_t>(device)];
      if (!free.empty()) {
        cudaEvent_t event = free.back();
        free.pop_back();
        return event;
      }
    }
  }
  const DeviceGuard guard(device);  // an event belongs to the device it is created on
  cudaEvent_t event = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

void release_event(int device, cudaEvent_t event) noexcept {
  if (event == nullptr) return;
  EventPool& pool = event_pool();
  std::lock_guard lock(pool.mutex);
  if (pool.free.size() <= static_cast<size_t>(device)) pool.free.resize(device + 1);
  pool.free[static_cast<size_t>(device)].push_back(event);
}

StreamMark record_event_or_wait(cudaStream_t stream, int device) noexcept {
  const QuietDeviceGuard guard(device);  // a default stream is the current device's
  // Not current, `device`'s default stream cannot be named: nullptr would be another device's.
  if (!guard.active() && is_default_stream(stream)) return {};
  cudaEvent_t event = nullptr;
  try {
    if (guard.active()) event = acquire_event(device);
  } catch (...) {
    event = nullptr;
  }
  if (event != nullptr && cudaEventRecord(event, stream) == cudaSuccess) return {event, false};
  cudaGetLastError();
  release_event(device, event);
  if (cudaStreamSynchronize(stream) != cudaSuccess) cudaGetLastError();
  return {nullptr, true};
}

// --- Stream

Stream Stream::create(int device, int priority) {
  DeviceGuard guard(device);
  cudaStream_t handle = nullptr;
  CUDA_CHECK(cudaStreamCreateWithPriority(&handle, cudaStreamNonBlocking, priority));
  return Stream(device, handle, true, register_stream(handle, device).id);
}

Stream::~Stream() {
  release();
}

Stream::Stream(Stream&& other) noexcept
    : device_(other.device_), handle_(other.handle_), owned_(other.owned_), id_(other.id_) {
  other.owned_ = false;
}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    release();
    device_ = other.device_;
    handle_ = other.handle_;
    id_ = other.id_;
    owned_ = std::exchange(other.owned_, false);
  }
  return *this;
}

void Stream::release() noexcept {
  if (!owned_) return;
  owned_ = false;
  notify_retired(device_, id_);  // first: what the listeners free retires with the rest
  retire_stream_blocks(device_, id_, handle_);  // Note [Stream ids]
  // Forgotten before the handle can be handed out again.
  forget_stream(handle_, id_);
  // cudaStreamDestroy returns at once; queued work still completes. A failure is ignored here,
  // and cleared so that the next launch check does not report it (Note [Device contexts]).
  if (cudaStreamDestroy(handle_) != cudaSuccess) cudaGetLastError();
}

void Stream::synchronize() const {
  DeviceGuard guard(device_);
  CUDA_CHECK(cudaStreamSynchronize(handle_));
}

bool Stream::query() const {
  DeviceGuard guard(device_);
  const cudaError_t status = cudaStreamQuery(handle_);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  CUDA_CHECK(status);
  return true;
}

void Stream::wait(const Event& event) const {
  DeviceGuard guard(device_);
  CUDA_CHECK(cudaStreamWaitEvent(handle_, event.handle(), 0));
}

// --- Event

Event::Event(bool enable_timing) {
  CUDA_CHECK(cudaEventCreateWithFlags(&handle_,
                                      enable_timing ? cudaEventDefault : cudaEventDisableTiming));
}

Event Event::pooled(int device) {
  return Event(acquire_event(device), device);
}

Event::~Event() {
  release();
}

Event::Event(Event&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), pool_device_(other.pool_device_) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    release();
    handle_ = std::exchange(other.handle_, nullptr);
    pool_device_ = other.pool_device_;
  }
  return *this;
}

void Event::release() noexcept {
  if (handle_ == nullptr) return;
  if (pool_device_ >= 0) {
    release_event(pool_device_, handle_);
  } else if (cudaEventDestroy(handle_) != cudaSuccess) {
    cudaGetLastError();
  }
  handle_ = nullptr;
}

void Event::record(cudaStream_t stream, int device) {
  DeviceGuard guard(device);
  CUDA_CHECK(cudaEventRecord(handle_, stream));
}

void Event::synchronize() const {
  CUDA_CHECK(cudaEventSynchronize(handle_));
}

bool Event::query() const {
  const cudaError_t status = cudaEventQuery(handle_);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  CUDA_CHECK(status);
  return true;
}

float Event::elapsed_ms(const Event& later) const {
  float milliseconds = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&milliseconds, handle_, later.handle_));
  return milliseconds;
}

// --- current stream

cudaStream_t current_stream(int device) {
  const auto& streams = thread_streams();
  return static_cast<size_t>(device) < streams.size() ? streams[static_cast<size_t>(device)]
                                                      : nullptr;
}

StreamGuard::StreamGuard(const Stream& stream)
    : device_(stream.device()), previous_(current_stream(stream.device())) {
  auto& streams = thread_streams();
  if (streams.size() <= static_cast<size_t>(device_)) streams.resize(device_ + 1, nullptr);
  streams[static_cast<size_t>(device_)] = stream.handle();
}

StreamGuard::~StreamGuard() {
  thread_streams()[static_cast<size_t>(device_)] = previous_;
}

void stream_wait_stream(cudaStream_t waiting, int waiting_device, cudaStream_t producer,
                        int producer_device) {
  if (waiting == producer && waiting_device == producer_device) return;
  const Event event = Event::pooled(producer_device);  // recorded on a stream of its own device
  {
    const DeviceGuard guard(producer_device);
    CUDA_CHECK(cudaEventRecord(event.handle(), producer));
  }
  const DeviceGuard guard(waiting_device);
  // An event of another device is fine here; reusing it while the wait is queued is too.
  CUDA_CHECK(cudaStreamWaitEvent(waiting, event.handle(), 0));
}

}  // namespace tandem::cuda
