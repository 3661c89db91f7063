#pragma once
/// Layers without parameters: ReLU, MaxPool2d, AdaptiveAvgPool2d, Flatten; and Sequential.

#include "engine/ops/elementwise.h"
#include "engine/ops/pool.h"
#include "nn/module.h"

namespace tandem::nn {

class ReLU final : public Module {
 public:
  Tensor forward(const Tensor& input) override { return relu(input); }
  std::string describe() const override { return "ReLU()"; }

 protected:
  std::shared_ptr<Module> make_twin() const override { return std::make_shared<ReLU>(); }
};

class MaxPool2d final : public Module {
 public:
  explicit MaxPool2d(const Pool2dOptions& options) : options_(options) {}
  Tensor forward(const Tensor& input) override { return max_pool2d(input, options_); }
  std::string describe() const override {
    return "MaxPool2d(" + std::to_string(options_.kernel_size) + ")";
  }

 protected:
  std::shared_ptr<Module> make_twin() const override {
    return std::make_shared<MaxPool2d>(options_);
  }

 private:
  Pool2dOptions options_;
};

class AdaptiveAvgPool2d final : public Module {
 public:
  AdaptiveAvgPool2d(int64_t out_h, int64_t out_w) : out_h_(out_h), out_w_(out_w) {}
  Tensor forward(const Tensor& input) override {
    return adaptive_avg_pool2d(input, out_h_, out_w_);
  }
  std::string describe() const override {
    return "AdaptiveAvgPool2d(" + std::to_string(out_h_) + ")";
  }

 protected:
  std::shared_ptr<Module> make_twin() const override {
    return std::make_shared<AdaptiveAvgPool2d>(out_h_, out_w_);
  }

 private:
  int64_t out_h_;
  int64_t out_w_;
};

class Flatten final : public Module {
 public:
  Tensor forward(const Tensor& input) override { return input.flatten(1); }
  std::string describe() const override { return "Flatten()"; }

 protected:
  std::shared_ptr<Module> make_twin() const override { return std::make_shared<Flatten>(); }
};

/// Children named "0", "1", ... applied in order (torch.nn.Sequential).
class Sequential final : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> module);
  Tensor forward(const Tensor& input) override;
  std::string describe() const override;
  size_t size() const { return children().size(); }

 protected:
  std::shared_ptr<Module> make_twin() const override;
};

}  // namespace tandem::nn
