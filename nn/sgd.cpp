#include "nn/sgd.h"

namespace tandem::nn {

Sgd::Sgd(std::vector<Tensor> parameters, const SgdConfig& config)
    : config_(config), parameters_(std::move(parameters)), buffers_(parameters_.size()) {
  set_lr(config.lr);
  // The engine checks the remaining values on the first step; check them here, at construction.
  TANDEM_CHECK(config.momentum >= 0.0f && config.weight_decay >= 0.0f && config.dampening >= 0.0f,
               "[SGD] momentum, dampening and weight_decay must be >= 0");
  TANDEM_CHECK(!config.nesterov || (config.momentum > 0.0f && config.dampening == 0.0f),
               "[SGD] Nesterov momentum needs momentum > 0 and zero dampening");
}

void Sgd::set_lr(float lr) {
  TANDEM_CHECK(lr >= 0.0f, "[SGD] learning rate must be >= 0, got ", lr);
  config_.lr = lr;
}

void Sgd::step() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Tensor& parameter = parameters_[i];
    const Tensor grad = parameter.grad();
    if (!grad.defined()) continue;
    const bool first_step = !buffers_[i].defined();
    if (first_step && config_.momentum != 0.0f) buffers_[i] = empty_like(parameter);
    const bool decay = !(config_.no_decay_for_bn_and_bias && parameter.dim() <= 1);
    sgd_step(parameter, grad.contiguous(), buffers_[i],
             {.lr = config_.lr,
              .momentum = config_.momentum,
              .dampening = config_.dampening,
              .weight_decay = decay ? config_.weight_decay : 0.0f,
              .nesterov = config_.nesterov,
              .first_step = first_step});
  }
}

void Sgd::zero_grad() {
  for (Tensor& parameter : parameters_) parameter.set_grad(Tensor());
}

}  // namespace tandem::nn
