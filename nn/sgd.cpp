#include "nn/sgd.h"

#include <algorithm>

#include "engine/autograd/grad_mode.h"
#include "engine/ops/factory.h"
#include "engine/ops/optim.h"
#include "engine/profiler.h"

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

SgdStepOptions step_options(const SgdConfig& config, const Tensor& parameter, bool first_step) {
  const bool decay = !(config.no_decay_for_bn_and_bias && parameter.dim() <= 1);
  return {.lr = config.lr,
          .momentum = config.momentum,
          .dampening = config.dampening,
          .weight_decay = decay ? config.weight_decay : 0.0f,
          .nesterov = config.nesterov,
          .first_step = first_step};
}

bool same_step(const SgdStepOptions& a, const SgdStepOptions& b) {
  return a.weight_decay == b.weight_decay && a.first_step == b.first_step;
}

namespace {

// Parameters that one sgd_step_multi call updates: the same device and the same options
// (weight decay differs for 1-D parameters under no_decay_for_bn_and_bias; first_step for a
// parameter whose first gradient arrives later than the others').
struct Group {
  Device device;
  SgdStepOptions options;
  std::vector<SgdTensors> tensors;
};

}  // namespace

void Sgd::step() {
  const profiler::RecordScope scope("Optimizer.step#SGD.step", profiler::Category::Annotation);
  NoGradGuard no_grad;
  std::vector<Group> groups;  // a handful: devices x {decay, no decay} x {first step, not}
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Tensor& parameter = parameters_[i];
    const Tensor grad = parameter.grad();
    if (!grad.defined()) continue;
    const bool first_step = !buffers_[i].defined();
    if (first_step && config_.momentum != 0.0f) buffers_[i] = empty_like(parameter);
    const SgdStepOptions options = step_options(config_, parameter, first_step);
    auto group = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.device == parameter.device() && same_step(g.options, options);
    });
    if (group == groups.end()) {
      groups.push_back(Group{.device = parameter.device(), .options = options, .tensors = {}});
      group = groups.end() - 1;
    }
    group->tensors.push_back({parameter, grad.contiguous(parameter.memory_format()), buffers_[i]});
  }
  for (const Group& group : groups) sgd_step_multi(group.tensors, group.options);
}

size_t Sgd::state_bytes() const {
  size_t bytes = 0;
  for (const Tensor& buffer : buffers_) bytes += buffer.defined() ? buffer.nbytes() : 0;
  return bytes;
}

std::vector<Tensor> Sgd::gradients() const {
  std::vector<Tensor> gradients;
  for (const Tensor& parameter : parameters_) {
    if (Tensor grad = parameter.grad(); grad.defined()) gradients.push_back(grad);
  }
  return gradients;
}

void Sgd::zero_grad() {
  const profiler::RecordScope scope("Optimizer.zero_grad#SGD.zero_grad",
                                    profiler::Category::Annotation);
  for (Tensor& parameter : parameters_) parameter.set_grad(Tensor());
}

}  // namespace tandem::nn
