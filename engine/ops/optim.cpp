#include "engine/ops/optim.h"

#include "engine/ops/checks.h"

namespace tandem {

void sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buffer,
              const SgdStepOptions& options) {
  ops::check_dtype("sgd_step", "param", param, DType::Float32);
  ops::check_shape("sgd_step", "grad", grad, param.shape());
  ops::check_dtype("sgd_step", "grad", grad, DType::Float32);
  TANDEM_CHECK(param.is_contiguous() && grad.is_contiguous(),
               "[sgd_step] needs contiguous param and grad");
  TANDEM_CHECK(options.lr >= 0.0f && options.momentum >= 0.0f && options.weight_decay >= 0.0f,
               "[sgd_step] lr, momentum and weight_decay must be >= 0 (got ", options.lr, ", ",
               options.momentum, ", ", options.weight_decay, ")");
  TANDEM_CHECK(!options.nesterov || (options.momentum > 0.0f && options.dampening == 0.0f),
               "[sgd_step] Nesterov momentum needs momentum > 0 and zero dampening");
  if (options.momentum != 0.0f) {
    ops::check_shape("sgd_step", "momentum_buffer", momentum_buffer, param.shape());
    TANDEM_CHECK(momentum_buffer.is_contiguous(), "[sgd_step] needs a contiguous momentum buffer");
  }
  ops::check_same_device("sgd_step", {&param, &grad, &momentum_buffer});
  backend_for(param.device()).sgd_step(param, grad, momentum_buffer, options);
}

}  // namespace tandem
