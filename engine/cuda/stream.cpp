#include "engine/cuda/stream.h"

#include <utility>
#include <vector>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device.h"
#include "engine/cuda/kernels.h"

namespace tandem::cuda {
namespace {

// The current stream of each device for this thread; nullptr is the legacy default stream.
std::vector<cudaStream_t>& thread_streams() {
  thread_local std::vector<cudaStream_t> streams;
  return streams;
}

}  // namespace

// --- Stream

Stream Stream::create(int device, int priority) {
  DeviceGuard guard(device);
  cudaStream_t handle = nullptr;
  CUDA_CHECK(cudaStreamCreateWithPriority(&handle, cudaStreamNonBlocking, priority));
  return Stream(device, handle, true);
}

Stream::~Stream() {
  release();
}

Stream::Stream(Stream&& other) noexcept
    : device_(other.device_), handle_(other.handle_), owned_(other.owned_) {
  other.owned_ = false;
}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    release();
    device_ = other.device_;
    handle_ = other.handle_;
    owned_ = std::exchange(other.owned_, false);
  }
  return *this;
}

void Stream::release() noexcept {
  // cudaStreamDestroy returns at once; queued work still completes.
  if (owned_) cudaStreamDestroy(handle_);
  owned_ = false;
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

Event::~Event() {
  release();
}

Event::Event(Event&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    release();
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void Event::release() noexcept {
  if (handle_ != nullptr) cudaEventDestroy(handle_);
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
  Event event = [&] {
    const DeviceGuard guard(producer_device);  // an event belongs to the device it is created on
    Event created;
    created.record(producer, producer_device);
    return created;
  }();
  DeviceGuard guard(waiting_device);
  // An event of another device is fine here; destroying it while the wait is queued is too.
  CUDA_CHECK(cudaStreamWaitEvent(waiting, event.handle(), 0));
}

void busy_wait(cudaStream_t stream, int device, double milliseconds) {
  DeviceGuard guard(device);
  kernels::spin(static_cast<long long>(milliseconds * 1e6), stream);
}

}  // namespace tandem::cuda
