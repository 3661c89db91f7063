#include "engine/backend.h"

#include "engine/cpu/cpu_backend.h"

namespace tandem {

void Backend::sgd_step_multi(const std::vector<SgdTensors>& tensors,
                             const SgdStepOptions& options) {
  for (SgdTensors t : tensors) sgd_step(t.param, t.grad, t.momentum_buffer, options);
}

Backend& backend_for(Device device) {
  if (device.is_cpu()) return cpu::backend();
  return cuda_backend();
}

}  // namespace tandem
