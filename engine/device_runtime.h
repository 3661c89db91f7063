#pragma once
/// The device runtime: what code above the kernels may ask of a device type — its allocator, how
/// many devices there are, their streams, waiting for them.
///
/// Note [Runtime apart from kernels]: PyTorch keeps the device runtime
/// (c10::DeviceGuardImplInterface, the allocators) apart from the ops (at::), and MLX keeps
/// allocator, device and streams apart from its primitives' eval_*. Tandem does the same: a
/// Backend (engine/backend.h) is a DeviceRuntime plus the kernels, and only the engine's op and
/// backend folders (engine/ops, engine/cpu, engine/cuda, engine/no_cuda, and engine's own
/// tensor.cpp and backend.cpp) include the kernel table. nn/, data/, parallel/ and apps/ see this
/// runtime and the ops, so adding a kernel touches the engine alone; the layering test
/// (tests/scripts/layering_test.sh) keeps it so.

#include <string>

#include "engine/allocator.h"
#include "engine/device.h"

namespace tandem {

/// One device's stream as some thread saw it, captured as a value another thread can wait for:
/// for CUDA the cudaStream_t (nullptr is the legacy default stream), for the CPU nothing.
struct StreamRef {
  Device device = Device::cpu();
  void* stream = nullptr;
};

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;

  virtual Allocator& allocator(Device device) = 0;
  /// Number of devices of this type; CPU devices are virtual, so unbounded (returns INT32_MAX).
  virtual int device_count() = 0;
  /// Blocks until all queued work on the device is done (no-op on CPU).
  virtual void synchronize(Device device) = 0;

  // --- stream order between threads (Note [Current stream] in engine/cuda/runtime/stream.h). On
  // the CPU both are no-ops: CPU work is done when the call that queued it returns.
  /// The calling thread's current stream of `device`.
  virtual StreamRef current_stream(Device device) = 0;
  /// Later work on the calling thread's current stream of producer.device waits for everything
  /// queued on `producer` so far, without blocking the host; a no-op when both are one stream.
  virtual void wait_for(const StreamRef& producer) = 0;
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
