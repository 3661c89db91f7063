#include "tests/support/cuda_busy_wait.h"

#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/runtime/device.h"

namespace tandem::cuda {

void busy_wait(cudaStream_t stream, int device, double milliseconds) {
  DeviceGuard guard(device);
  kernels::spin(static_cast<long long>(milliseconds * 1e6), stream);
}

}  // namespace tandem::cuda
