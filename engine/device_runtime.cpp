// runtime_for: the runtime objects of each device type, apart from their kernels (Note [Runtime
// apart from kernels]). CUDA's is engine/cuda/runtime/cuda_runtime.cpp, or the stub of a build
// without CUDA (engine/no_cuda/no_cuda.cpp), whose runtime throws.

#include "engine/device_runtime.h"

#include "engine/cpu/cpu_runtime.h"

namespace tandem {

DeviceRuntime& runtime_for(Device device) {
  if (device.is_cpu()) return cpu::runtime();
  return cuda_runtime();
}

}  // namespace tandem
