#pragma once
/// Streams and events, and the calling thread's current stream per device.
///
/// Note [Current stream]: every CUDA kernel, copy and library call of the backend is queued on
/// the current stream of its device for the calling thread. Unless a StreamGuard says
/// otherwise that is the device's legacy default stream, shared by all threads, so work that
/// one thread hands to another (forward on the main thread, backward on the device's autograd
/// worker) stays in order without any event. Side streams (a copy stream, NCCL's stream) are
/// created non-blocking and ordered against the default stream with events; a tensor used on
/// a stream other than the one it was allocated on must be announced with record_stream()
/// (engine/cuda/runtime/caching_allocator.h) before it is freed, exactly as in PyTorch.
///
/// The current stream is per thread and is not carried into backward: a forward run under a
/// StreamGuard has its backward run on the default stream of the autograd worker.
///
/// Note [Stream ids]: the caching allocator keeps freed blocks per stream. A driver may give a
/// new stream the handle of a destroyed one, so blocks are keyed by process-unique ids that are
/// never reused (stream_info()), not by handles; and a Stream, before destroying its stream,
/// has the allocators of its device move that stream's cached blocks to the default stream once
/// its queued work has run (CachingAllocator::retire_stream), instead of keeping them for a
/// stream that will never allocate again. Only streams of Stream::create get ids; the default
/// streams (the legacy one, and cudaStreamPerThread, a blocking stream that Tandem never uses)
/// are id 0 of their device; any other handle is refused, since nothing would say when it is
/// destroyed and its handle handed out again, nor which device it is on.
///
/// Note [Event pool]: ordering one stream after another takes an event; creating and destroying
/// one per wait costs host time on the hot path (every cross-device copy waits twice). Events
/// therefore come from a pool per device (acquire_event), and go back to it as soon as nothing
/// will query them: a queued cudaStreamWaitEvent has captured the event's state already.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::cuda {

class Event;

/// A CUDA stream: either owned (created here, destroyed with this object) or a view of a
/// device's legacy default stream.
class Stream {
 public:
  /// A new stream on `device` that does not synchronise implicitly with the default stream.
  /// Lower priority numbers run first (cudaDeviceGetStreamPriorityRange); 0 is the default.
  static Stream create(int device, int priority = 0);
  /// The legacy default stream of `device` (handle nullptr), not owned.
  static Stream default_stream(int device) { return Stream(device, nullptr, false, 0); }

  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t handle() const { return handle_; }
  int device() const { return device_; }
  /// Process-unique and never reused (Note [Stream ids]); 0 for the legacy default stream.
  uint64_t id() const { return id_; }

  /// Blocks the host until everything queued so far has run.
  void synchronize() const;
  /// True when everything queued so far has run.
  bool query() const;
  /// Later work on this stream waits for `event` (no host synchronisation).
  void wait(const Event& event) const;

 private:
  Stream(int device, cudaStream_t handle, bool owned, uint64_t id)
      : device_(device), handle_(handle), owned_(owned), id_(id) {}
  void release() noexcept;

  int device_;
  cudaStream_t handle_;
  bool owned_;
  uint64_t id_;
};

/// What the allocators know of a stream handle (Note [Stream ids]).
struct StreamInfo {
  uint64_t id = 0;  ///< 0: the legacy default stream
  int device = 0;
};
/// For a stream of Stream::create: its id and device. For a default stream of `device` (nullptr,
/// cudaStreamLegacy, cudaStreamPerThread): id 0 and `device`. Any other handle (a stream
/// created elsewhere, or destroyed) throws "[cuda stream] stream 0x... was not made by
/// Stream::create ...". Thread-safe.
StreamInfo stream_info(cudaStream_t stream, int device);
/// nullptr, cudaStreamLegacy or cudaStreamPerThread: a default stream of the current device.
bool is_default_stream(cudaStream_t stream);

/// Called with a stream's device and id when a Stream of Stream::create is destroyed, before
/// its blocks retire (Note [Stream ids]), for caches keyed by stream ids that must let go of
/// what they hold for it (the cuBLAS workspaces). Must not throw.
using StreamRetired = void (*)(int device, uint64_t id) noexcept;
/// Adds `listener` for every later stream retirement, for the rest of the process. Thread-safe.
void on_stream_retired(StreamRetired listener);

/// An event of `device` without timing from the pool (Note [Event pool]), created when the pool
/// is empty.
cudaEvent_t acquire_event(int device);
/// Gives an event of acquire_event() back once nothing will query or synchronise with it (a
/// queued stream wait does not count). Never throws; nullptr is ignored.
void release_event(int device, cudaEvent_t event) noexcept;
/// What record_event_or_wait() did.
struct StreamMark {
  /// A pooled event recorded on the stream: give it back with release_event() once it passed.
  cudaEvent_t event = nullptr;
  /// No event: the host waited for the stream instead (or that wait failed and was cleared).
  bool waited = false;
  // Neither: the stream is a default stream of a device that could not be made current, so it
  // could be neither recorded nor waited for; what it may still use must never be reused.
};
/// For code that cannot throw (deallocate()): marks the work queued so far on `stream` (of
/// `device`) with a pooled event, or else waits for it on the host; failures are cleared (Note
/// [Device contexts]).
StreamMark record_event_or_wait(cudaStream_t stream, int device) noexcept;

/// A CUDA event of the device current at its creation: record it only on streams of that
/// device (any device's stream may wait for it). Timing is off unless asked for: timed events
/// cost more to record.
class Event {
 public:
  /// A new event, destroyed with this object.
  explicit Event(bool enable_timing = false);
  /// An event of `device` from the pool (Note [Event pool]), given back to it with this object:
  /// for the events made per loss, per uploaded batch or per collective. Without timing.
  static Event pooled(int device);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  /// Captures the work queued so far on `stream` (of `device`).
  void record(cudaStream_t stream, int device);
  void record(const Stream& stream) { record(stream.handle(), stream.device()); }
  /// Blocks the host until the captured work has run.
  void synchronize() const;
  /// True when the captured work has run (or nothing was ever recorded).
  bool query() const;
  /// Milliseconds between this event and a later one; both recorded with timing.
  float elapsed_ms(const Event& later) const;
  cudaEvent_t handle() const { return handle_; }

 private:
  Event(cudaEvent_t handle, int pool_device) : handle_(handle), pool_device_(pool_device) {}
  void release() noexcept;
  cudaEvent_t handle_ = nullptr;
  int pool_device_ = -1;  ///< the pool it goes back to; -1: destroyed instead
};

/// The calling thread's current stream on `device` (Note [Current stream]).
cudaStream_t current_stream(int device);

/// Makes `stream` the current stream of its device for the calling thread, for the scope. The
/// stream must outlive the guard.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  cudaStream_t previous_;
};

/// Later work on `waiting` (a stream of `waiting_device`) waits for all work queued so far on
/// `producer` (of `producer_device`): records a pooled event on one and waits for it on the
/// other, without blocking the host. No-op for the same stream of the same device.
void stream_wait_stream(cudaStream_t waiting, int waiting_device, cudaStream_t producer,
                        int producer_device);

}  // namespace tandem::cuda
