// The one kernel launcher that engine/cuda/runtime/stream.cpp calls (busy_wait), for the fake
// runtime: it queues a work item that completes when the test runs the stream, then checks the
// launch as engine/cuda/kernels/memory.cu does.

#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/runtime/cuda_check.h"
#include "tests/support/fake_cuda/fake_cuda_runtime.h"

namespace tandem::cuda::kernels {

void spin(long long /*nanoseconds*/, cudaStream_t stream) {
  fake_cuda::launch(stream);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda::kernels
