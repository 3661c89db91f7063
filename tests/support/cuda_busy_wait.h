#pragma once
/// busy_wait: a kernel that keeps a stream busy, for the tests of stream ordering (the allocator's
/// stream tests on the fake runtime, the GPU tests of streams, HostNeverWaitsGpu). A test helper,
/// so it lives here rather than in the runtime, which would otherwise include the kernels.

#include <cuda_runtime_api.h>

namespace tandem::cuda {

/// Queues a kernel that keeps `stream` busy for about `milliseconds` (spinning on the clock).
/// It computes nothing.
void busy_wait(cudaStream_t stream, int device, double milliseconds);

}  // namespace tandem::cuda
