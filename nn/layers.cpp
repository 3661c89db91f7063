#include "nn/layers.h"

namespace tandem::nn {

Sequential::Sequential(std::vector<std::shared_ptr<Module>> modules) {
  for (auto& module : modules) push_back(std::move(module));
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(children().size()), std::move(module));
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& [name, child] : children()) x = (*child)(x);
  return x;
}

std::string Sequential::describe() const {
  return "Sequential(" + std::to_string(children().size()) + " modules)";
}

std::shared_ptr<Module> Sequential::make_twin() const {
  // Children are cloned whole; Module::clone then copies values it already has (same data).
  auto twin = std::make_shared<Sequential>();
  for (const auto& [name, child] : children()) twin->push_back(child->clone());
  return twin;
}

}  // namespace tandem::nn
