#include "nn/module.h"

#include <unordered_set>

#include "engine/autograd/grad_mode.h"
#include "engine/tensor_impl.h"
#include "nn/default_init.h"

namespace tandem::nn {

Tensor Module::operator()(const Tensor& input) {
  if (forward_pre_hooks_.empty()) return forward(input);
  Tensor x = input;
  for (const auto& [id, hook] : forward_pre_hooks_) x = hook(*this, x);
  return forward(x);
}

int Module::register_forward_pre_hook(ForwardPreHook hook) {
  forward_pre_hooks_.emplace_back(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}

void Module::remove_forward_pre_hook(int id) {
  std::erase_if(forward_pre_hooks_, [id](const auto& entry) { return entry.first == id; });
}

Tensor Module::register_parameter(std::string name, Tensor value) {
  value.set_requires_grad(true);
  parameters_.emplace_back(std::move(name), value);
  return value;
}

Tensor Module::register_buffer(std::string name, Tensor value) {
  buffers_.emplace_back(std::move(name), value);
  return value;
}

void Module::collect(const std::string& prefix, bool parameters, bool buffers,
                     NamedTensors& out) const {
  // PyTorch's order: own parameters, own buffers, then each child in turn.
  if (parameters) {
    for (const auto& [name, tensor] : parameters_) out.emplace_back(prefix + name, tensor);
  }
  if (buffers) {
    for (const auto& [name, tensor] : buffers_) out.emplace_back(prefix + name, tensor);
  }
  for (const auto& [name, child] : children_)
    child->collect(prefix + name + ".", parameters, buffers, out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors all;
  collect("", true, false, all);
  // A tensor registered twice (a shared module, tied weights) is listed once, under its first
  // name, as PyTorch's named_parameters(remove_duplicate=True): an optimizer or DDP given it
  // twice would step or average it twice.
  NamedTensors out;
  std::unordered_set<const TensorImpl*> seen;
  for (auto& entry : all) {
    if (seen.insert(entry.second.impl()).second) out.push_back(std::move(entry));
  }
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, tensor] : named_parameters()) out.push_back(tensor);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect("", false, true, out);
  return out;
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  collect("", true, true, out);
  return out;
}

int64_t Module::parameter_count() const {
  int64_t total = 0;
  for (const auto& [name, tensor] : named_parameters()) total += tensor.numel();
  return total;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::set_precision(Precision precision) {
  precision_ = precision;
  for (auto& [name, child] : children_) child->set_precision(precision);
}

void Module::to(Device device) {
  for (auto& [name, tensor] : state_dict()) {
    if (tensor.device() == device) continue;
    const Tensor grad = tensor.grad();
    tensor.set_data(tensor.detach().to(device));
    if (grad.defined()) tensor.set_grad(grad.to(device));
  }
}

void Module::to(MemoryFormat format) {
  NoGradGuard no_grad;
  for (auto& [name, tensor] : state_dict()) {
    if (tensor.dim() != 4 || tensor.is_contiguous(format)) continue;
    const Tensor grad = tensor.grad();
    tensor.set_data(tensor.detach().contiguous(format));
    if (grad.defined()) tensor.set_grad(grad.contiguous(format));
  }
}

void Module::zero_grad() {
  for (auto& [name, tensor] : named_parameters()) tensor.set_grad(Tensor());
}

void Module::reset_parameters(Generator& generator) {
  NoGradGuard no_grad;
  reset_own_parameters(generator);
  for (auto& [name, child] : children_) child->reset_parameters(generator);
}

void Module::initialise_by_default() {
  draw_default_init([this](Generator& generator) {
    NoGradGuard no_grad;
    reset_own_parameters(generator);
  });
}

std::shared_ptr<Module> Module::clone() const {
  std::shared_ptr<Module> twin;
  {
    const SkipDefaultInit values_copied_below;
    twin = make_twin();
  }
  const NamedTensors source = state_dict();
  const NamedTensors target = twin->state_dict();
  TANDEM_CHECK(source.size() == target.size(), "[clone] ", describe(), " built a twin with ",
               target.size(), " tensors instead of ", source.size());
  NoGradGuard no_grad;
  for (size_t i = 0; i < source.size(); ++i) {
    const Tensor& from = source[i].second;
    TANDEM_CHECK(source[i].first == target[i].first && from.shape() == target[i].second.shape(),
                 "[clone] twin of ", describe(), " differs at ", source[i].first);
    Tensor into = target[i].second;
    into.set_data(from.detach().clone());
    into.set_requires_grad(from.requires_grad());
  }
  twin->train(training_);
  twin->set_precision(precision_);
  return twin;
}

}  // namespace tandem::nn
