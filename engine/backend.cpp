#include "engine/backend.h"

#include "engine/cpu/cpu_backend.h"

namespace tandem {

Backend& backend_for(Device device) {
  if (device.is_cpu()) return cpu::backend();
  return cuda_backend();
}

}  // namespace tandem
