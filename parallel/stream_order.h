#pragma once
/// Stream order for code in parallel/ that handles CPU and CUDA tensors alike (the Reducer):
/// the calling thread's current stream of a device, captured as a value, and "the calling
/// thread's current stream waits for that one". On CPU devices both are no-ops (CPU work is done
/// when the call that queued it returns); on CUDA devices they are cuda::current_stream() and
/// cuda::stream_wait_stream() (Note [Current stream] in engine/cuda/stream.h), so no CUDA
/// header reaches the Reducer.

#include "engine/device.h"

namespace tandem::parallel {

/// One device's stream as some thread saw it: for CUDA the cudaStream_t (nullptr is the legacy
/// default stream), for CPU nothing.
struct StreamRef {
  Device device = Device::cpu();
  void* stream = nullptr;
};

/// The calling thread's current stream of `device`.
StreamRef current_stream_of(Device device);

/// Later work on the calling thread's current stream of producer.device waits for everything
/// queued on `producer` so far, without blocking the host. A no-op on CPU and when the two are
/// the same stream (the common case: both are the legacy default stream).
void current_stream_wait_for(const StreamRef& producer);

}  // namespace tandem::parallel
