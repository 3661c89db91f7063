#pragma once
/// The device runtime: what code above the kernels may ask of a device type — its allocator, how
/// many devices there are, their streams, waiting for them.
///
/// Note [Runtime apart from kernels]: PyTorch keeps the device runtime
/// (c10::DeviceGuardImplInterface, the allocators) apart from the ops (at::), and MLX keeps
/// allocator, device and streams apart from its primitives' eval_*. Tandem does the same: each
/// device type has a DeviceRuntime object (engine/cpu/cpu_runtime.h,
/// engine/cuda/runtime/cuda_runtime.h) and, apart from it, a Backend of kernels
/// (engine/backend/backend.h) on top of it. Only the engine's op and backend folders (engine/ops,
/// engine/cpu, engine/cuda, engine/no_cuda, and engine's own tensor.cpp and backend.cpp) include
/// the kernel table. nn/, data/, parallel/ and apps/ see this runtime and the ops, so adding a
/// kernel touches the engine alone; the layering test (tests/scripts/layering_test.sh) keeps it so.

#include <memory>
#include <string>

#include "engine/allocator.h"
#include "engine/device.h"
#include "engine/device_syncs.h"

namespace tandem {

/// One device's stream as some thread saw it, captured as a value another thread can wait for:
/// for CUDA the cudaStream_t (nullptr is the legacy default stream), for the CPU nothing.
struct StreamRef {
  Device device = Device::cpu();
  void* stream = nullptr;
};

/// A point in the work queued on one device, for timing that work without waiting for it.
///
/// Note [Timing marks]: timing a phase of GPU work with the host clock needs the host to wait for
/// the device at both ends, and then the host cannot queue the next phase while the device runs
/// this one: a launch-bound step is measured as host time plus device time, not their overlap.
/// A mark instead captures the work queued so far on the calling thread's current stream (a
/// CUDA event with timing, torch.cuda.Event(enable_timing=True)), and the marks are read after
/// one synchronisation at the end. On the CPU, whose work is done when the call that queued it
/// returns, a mark is the host clock at the call: the numbers timing with the host clock gave.
class TimingMark {
 public:
  virtual ~TimingMark() = default;
  /// Milliseconds from this mark to `later`, a mark of the same device made after it. Blocks
  /// until `later`'s work has run, if it has not (counted, Note [Counting device
  /// synchronisations]); after DeviceRuntime::synchronize() it never does.
  virtual double elapsed_ms(const TimingMark& later) const = 0;
};

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;

  virtual Allocator& allocator(Device device) = 0;
  /// Number of devices of this type; CPU devices are virtual, so unbounded (returns INT32_MAX).
  virtual int device_count() = 0;
  /// Blocks until all queued work on the device is done (no-op on CPU). Counted, on every device
  /// type (Note [Counting device synchronisations] in engine/device_syncs.h).
  void synchronize(Device device) {
    detail::count_device_sync();
    synchronize_device(device);
  }
  /// Marks the work queued so far on the calling thread's current stream of `device` (Note
  /// [Timing marks]); never blocks.
  virtual std::unique_ptr<TimingMark> mark_time(Device device) = 0;

  // --- stream order between threads (Note [Current stream] in engine/cuda/runtime/stream.h). On
  // the CPU both are no-ops: CPU work is done when the call that queued it returns.
  /// The calling thread's current stream of `device`.
  virtual StreamRef current_stream(Device device) = 0;
  /// Later work on the calling thread's current stream of producer.device waits for everything
  /// queued on `producer` so far, without blocking the host; a no-op when both are one stream.
  virtual void wait_for(const StreamRef& producer) = 0;

 protected:
  /// What synchronize() does, once it has counted the call.
  virtual void synchronize_device(Device device) = 0;
};

/// The runtime of `device`'s type. CUDA in a build without CUDA throws.
DeviceRuntime& runtime_for(Device device);
/// CUDA's runtime; throws like runtime_for(Device::cuda(0)) where there is none.
DeviceRuntime& cuda_runtime();
/// True when CUDA tensors can be used: a build with the CUDA backend and at least one device.
/// Never throws (a machine without a GPU or driver simply has none).
bool cuda_available();
/// Why cuda_available() is false, in one line: "built without CUDA" or
/// "no CUDA device: <the driver's message>". Empty when it is true.
std::string cuda_unavailable_reason();

}  // namespace tandem
