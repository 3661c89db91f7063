#include "engine/backend/backend.h"

#include "engine/cpu/cpu_backend.h"

namespace tandem {

void Backend::sgd_step_multi(const std::vector<SgdTensors>& tensors,
                             const SgdStepOptions& options) {
  for (SgdTensors t : tensors) sgd_step(t.param, t.grad, t.momentum_buffer, options);
}

void Backend::batch_norm_relu_forward_training(const Tensor& x, const Tensor&, const Tensor&,
                                               const Tensor&, const BatchNormRunning&, float,
                                               Tensor&, Tensor&, Tensor&) {
  TANDEM_FAIL("[batch_norm2d] this backend has no fused batch norm + ReLU for ", x.device());
}

void Backend::batch_norm_relu_backward(const Tensor&, const Tensor&, const Tensor& x, const Tensor&,
                                       const Tensor&, const Tensor&, float, Tensor&, Tensor&,
                                       Tensor&, Tensor&) {
  TANDEM_FAIL("[batch_norm2d] this backend has no fused batch norm + ReLU for ", x.device());
}

Backend& backend_for(Device device) {
  if (device.is_cpu()) return cpu::backend();
  return cuda_backend();
}

}  // namespace tandem
