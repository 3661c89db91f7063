#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/tandem.h"
#include "nn/conv2d.h"
#include "nn/default_init.h"
#include "nn/linear.h"
#include "nn/resnet.h"

namespace tandem::nn {
namespace {

std::vector<std::string> keys(const NamedTensors& tensors) {
  std::vector<std::string> out;
  for (const auto& [name, tensor] : tensors) out.push_back(name);
  return out;
}

TEST(Module, StateDictKeysMatchPyTorch) {
  Generator generator(0);
  const auto model = make_resnet("resnet20", generator);
  const std::vector<std::string> names = keys(model->state_dict());
  // The order and names torchvision-style code gives for the same architecture.
  const std::vector<std::string> head = {
      "conv1.weight",          "bn1.weight",         "bn1.bias",
      "bn1.running_mean",      "bn1.running_var",    "bn1.num_batches_tracked",
      "layer1.0.conv1.weight", "layer1.0.bn1.weight"};
  ASSERT_GE(names.size(), head.size());
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + head.size()), head);
  EXPECT_NE(std::find(names.begin(), names.end(), "layer2.0.downsample.0.weight"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "layer3.2.bn2.running_var"), names.end());
  EXPECT_EQ(names[names.size() - 2], "fc.weight");
  EXPECT_EQ(names.back(), "fc.bias");
  // Parameters are the state minus buffers, in the same relative order.
  EXPECT_EQ(model->named_parameters().size() + model->named_buffers().size(), names.size());
  EXPECT_EQ(keys(model->named_parameters()).front(), "conv1.weight");
}

TEST(Module, ParameterCountsMatchThePublishedOnes) {
  Generator generator(0);
  // Published: ResNet-20 0.27 M, ResNet-56 0.85 M, ResNet-110 1.7 M (He et al., option A);
  // ResNet-18 11.2 M. Option-B shortcuts (Note [Shortcut]) add a few thousand.
  const std::vector<std::pair<std::string, double>> published = {
      {"resnet20", 0.27e6}, {"resnet56", 0.85e6}, {"resnet110", 1.7e6}, {"resnet18", 11.2e6}};
  for (const auto& [arch, count] : published) {
    const int64_t actual = make_resnet(arch, generator)->parameter_count();
    EXPECT_NEAR(static_cast<double>(actual), count, 0.02 * count) << arch << ": " << actual;
  }
  // Exact values of this definition; 11,173,962 is the widely quoted CIFAR ResNet-18 count.
  EXPECT_EQ(make_resnet("resnet20", generator)->parameter_count(), 272474);
  EXPECT_EQ(make_resnet("resnet18", generator)->parameter_count(), 11173962);
}

TEST(Module, ForwardAndBackwardReachEveryParameter) {
  Generator generator(1);
  const auto model = make_resnet("resnet20", generator);
  const Tensor images = randn({4, 3, 32, 32}, generator);
  const Tensor labels = from_vector<int64_t>({1, 2, 3, 4}, {4}, {.dtype = DType::Int64});
  const Tensor logits = model->forward(images);
  EXPECT_EQ(logits.shape(), (Shape{4, 10}));
  cross_entropy(logits, labels).backward();
  for (const auto& [name, parameter] : model->named_parameters()) {
    ASSERT_TRUE(parameter.grad().defined()) << name;
    EXPECT_EQ(parameter.grad().shape(), parameter.shape()) << name;
  }
  model->zero_grad();
  EXPECT_FALSE(model->parameters().front().grad().defined());
}

// The hooks ZeRO stage 3 gathers a unit's parameters in: a ResNet calls its stem, blocks and head
// through operator(), so each hook sees its module's calls in forward order, and a hook's
// returned input is what the module runs on.
TEST(Module, ForwardPreHooksSeeChildrenInForwardOrderAndMayReplaceTheInput) {
  Generator generator(1);
  const auto model = make_resnet("resnet20", generator);
  std::vector<std::string> calls;
  std::vector<std::pair<Module*, int>> hooks;
  std::vector<std::pair<std::string, Module*>> watched;  // the top-level children, a stage's blocks
  for (const auto& [name, child] : model->children()) {
    if (dynamic_cast<Sequential*>(child.get()) == nullptr) {
      watched.emplace_back(name, child.get());
      continue;
    }
    for (const auto& [index, block] : child->children()) {
      watched.emplace_back(name + "." + index, block.get());
    }
  }
  for (const auto& [label, module] : watched) {
    hooks.emplace_back(module, module->register_forward_pre_hook(
                                   [&calls, label = label](Module&, const Tensor& input) {
                                     calls.push_back(label);
                                     return input;
                                   }));
  }
  const Tensor images = randn({2, 3, 32, 32}, generator);
  const Tensor plain = model->forward(images);
  EXPECT_EQ(calls, (std::vector<std::string>{"conv1", "layer1.0", "layer1.1", "layer1.2",
                                             "layer2.0", "layer2.1", "layer2.2", "layer3.0",
                                             "layer3.1", "layer3.2", "avgpool", "fc"}));
  for (const auto& [module, id] : hooks) module->remove_forward_pre_hook(id);
  calls.clear();
  Module& fc = *model->children().back().second;
  fc.register_forward_pre_hook([](Module&, const Tensor& input) { return mul(input, 0.0f); });
  const Tensor replaced = model->forward(images);
  EXPECT_TRUE(calls.empty()) << "removed hooks run no more";
  EXPECT_NE(plain.to_vector<float>(), replaced.to_vector<float>());
  const std::vector<float> bias = model->named_parameters().back().second.to_vector<float>();
  const std::vector<float> row = replaced.slice(0, 1).to_vector<float>();
  EXPECT_EQ(row, bias) << "fc ran on the hook's zeros";
}

TEST(Module, CloneIsIndependent) {
  Generator generator(2);
  const auto model = make_resnet("resnet20", generator);
  model->eval();
  const auto copy = model->clone();
  EXPECT_FALSE(copy->is_training());
  const NamedTensors original = model->state_dict();
  const NamedTensors cloned = copy->state_dict();
  ASSERT_EQ(keys(original), keys(cloned));
  for (size_t i = 0; i < original.size(); ++i) {
    EXPECT_NE(original[i].second.storage(), cloned[i].second.storage()) << original[i].first;
    EXPECT_EQ(original[i].second.requires_grad(), cloned[i].second.requires_grad());
  }
  // Same values, same outputs; changing the copy leaves the original alone.
  const Tensor images = randn({2, 3, 32, 32}, generator);
  EXPECT_EQ((*model)(images).to_vector<float>(), (*copy)(images).to_vector<float>());
  Tensor first = cloned.front().second;
  first.fill_(0.0);
  EXPECT_NE(original.front().second.to_vector<float>(), first.to_vector<float>());
}

TEST(Module, TrainEvalAndRunningStatistics) {
  Generator generator(3);
  const auto model = make_resnet("resnet20", generator);
  const Tensor images = randn({2, 3, 32, 32}, generator);
  const NamedTensors buffers = model->named_buffers();
  const Tensor tracked = buffers[2].second;  // bn1.num_batches_tracked
  ASSERT_EQ(buffers[2].first, "bn1.num_batches_tracked");
  (*model)(images);
  (*model)(images);
  EXPECT_EQ(tracked.item(), 2.0);
  model->eval();
  const std::vector<float> mean_before = buffers[0].second.to_vector<float>();
  (*model)(images);
  EXPECT_EQ(tracked.item(), 2.0);
  EXPECT_EQ(buffers[0].second.to_vector<float>(), mean_before);
}

TEST(Module, ToMovesInPlaceKeepingHandles) {
  Generator generator(4);
  const auto model = make_resnet("resnet20", generator);
  const Tensor weight = model->parameters().front();
  const std::vector<float> values = weight.to_vector<float>();
  model->to(Device::cpu(1));
  EXPECT_EQ(weight.device(), Device::cpu(1));  // the handle taken before the move sees it
  EXPECT_EQ(weight.to_vector<float>(), values);
  EXPECT_TRUE(weight.requires_grad());
  for (const auto& [name, tensor] : model->state_dict())
    EXPECT_EQ(tensor.device(), Device::cpu(1)) << name;
  const Tensor logits = (*model)(randn({2, 3, 32, 32}, generator, {.device = Device::cpu(1)}));
  EXPECT_EQ(logits.device(), Device::cpu(1));
}

TEST(Module, SeededInitialisationIsReproducible) {
  Generator a(7), b(7);
  EXPECT_EQ(make_resnet("resnet20", a)->parameters()[0].to_vector<float>(),
            make_resnet("resnet20", b)->parameters()[0].to_vector<float>());
  EXPECT_THROW(resnet_config("resnet21"), Error);
}

// Note [Initialised at construction]: a layer nobody initialised holds PyTorch's default
// U(±1/√fan_in), not zeros, and manual_seed makes the draw reproducible.
TEST(Module, LayersHoldPyTorchsDefaultInitialisationFromConstruction) {
  manual_seed(3);
  const Linear first(LinearConfig{16, 4});
  const Conv2d conv(Conv2dConfig{.in_channels = 2, .out_channels = 3, .kernel_size = 3});
  const std::vector<float> weights = first.parameters()[0].to_vector<float>();
  const float bound = 1.0f / std::sqrt(16.0f);
  EXPECT_TRUE(std::all_of(weights.begin(), weights.end(),
                          [&](float w) { return w != 0.0f && std::abs(w) <= bound; }));
  const std::vector<float> conv_weights = conv.parameters()[0].to_vector<float>();
  EXPECT_TRUE(
      std::any_of(conv_weights.begin(), conv_weights.end(), [](float w) { return w != 0; }));

  manual_seed(3);
  EXPECT_EQ(Linear(LinearConfig{16, 4}).parameters()[0].to_vector<float>(), weights);
  EXPECT_NE(Linear(LinearConfig{16, 4}).parameters()[0].to_vector<float>(), weights);
}

TEST(Module, ClonesAndSkippedLayersLeaveTheSharedGeneratorAlone) {
  const auto weights = [](const Module& m) { return m.parameters()[0].to_vector<float>(); };
  manual_seed(5);
  const Linear first_draw(LinearConfig{8, 8});
  const Linear second_draw(LinearConfig{8, 8});

  manual_seed(5);
  const Linear original(LinearConfig{8, 8});
  const std::shared_ptr<Module> copy = original.clone();
  EXPECT_EQ(weights(*copy), weights(original));
  EXPECT_EQ(weights(Linear(LinearConfig{8, 8})), weights(second_draw));  // the clone drew nothing

  manual_seed(5);
  {
    const SkipDefaultInit skip;
    EXPECT_EQ(weights(Linear(LinearConfig{8, 8})), std::vector<float>(64, 0.0f));
  }
  EXPECT_EQ(weights(Linear(LinearConfig{8, 8})), weights(first_draw));
}

// A module registered twice (tied weights): its tensors are parameters once, under the first
// name, as PyTorch's named_parameters(); state_dict() keeps both names.
class TiedLinear final : public Module {
 public:
  TiedLinear() {
    auto shared = std::make_shared<Linear>(LinearConfig{3, 3});
    register_module("first", shared);
    register_module("second", shared);
  }
  Tensor forward(const Tensor& x) override { return x; }
  std::string describe() const override { return "TiedLinear"; }

 protected:
  std::shared_ptr<Module> make_twin() const override { return std::make_shared<TiedLinear>(); }
};

TEST(Module, TiedParametersAreListedOnce) {
  TiedLinear model;
  EXPECT_EQ(keys(model.named_parameters()),
            (std::vector<std::string>{"first.weight", "first.bias"}));
  EXPECT_EQ(model.parameters().size(), 2u);
  EXPECT_EQ(keys(model.state_dict()), (std::vector<std::string>{"first.weight", "first.bias",
                                                                "second.weight", "second.bias"}));
}

}  // namespace
}  // namespace tandem::nn
