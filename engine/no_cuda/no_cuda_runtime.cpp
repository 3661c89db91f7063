// Linked when Tandem is built without CUDA: the CUDA runtime's entry points (engine/device.h,
// engine/device_runtime.h), which say there is no device, and throw where one is used.

#include <cstdlib>

#include "engine/backend/backend.h"
#include "engine/device.h"
#include "engine/device_runtime.h"

namespace tandem {

DeviceRuntime& cuda_runtime() {
  cuda_backend();  // throws: this build has no CUDA backend (no_cuda.cpp)
  std::abort();    // not reached
}

bool cuda_available() {
  return false;
}

std::string cuda_unavailable_reason() {
  return "built without CUDA";
}

void bind_thread_to(Device /*device*/) noexcept {}  // no CUDA device can exist

}  // namespace tandem
