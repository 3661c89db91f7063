#pragma once
/// ResNets for CIFAR-10 (32×32 inputs).
///
/// - resnet20/32/44/56/110 (He et al. 2016, §4.2): a 3×3 stem of 16 channels, three stages of
///   n = (depth − 2) / 6 basic blocks with 16, 32, 64 channels, global average pool, fc.
/// - resnet18 (the usual CIFAR variant): 3×3 stem of 64 channels, no max-pool, four stages of
///   two blocks with 64, 128, 256, 512 channels.
///
/// Note [Shortcut]: where a block changes width or resolution its shortcut is a 1×1 strided
/// convolution + BatchNorm (the paper's option B, torchvision's `downsample`), not the
/// parameter-free zero-padding option A. It adds 0.3 % parameters to ResNet-20 and keeps
/// torchvision's state_dict names (layer2.0.downsample.0.weight).

#include <string>
#include <vector>

#include "nn/batch_norm2d.h"
#include "nn/conv2d.h"
#include "nn/layers.h"
#include "nn/linear.h"

namespace tandem::nn {

struct BasicBlockConfig {
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t stride = 1;
};

/// relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)).
class BasicBlock final : public Module {
 public:
  explicit BasicBlock(const BasicBlockConfig& config);
  Tensor forward(const Tensor& input) override;
  std::string describe() const override;

 protected:
  std::shared_ptr<Module> make_twin() const override {
    return std::make_shared<BasicBlock>(config_);
  }

 private:
  BasicBlockConfig config_;
  std::shared_ptr<Conv2d> conv1_;
  std::shared_ptr<BatchNorm2d> bn1_;
  std::shared_ptr<Conv2d> conv2_;
  std::shared_ptr<BatchNorm2d> bn2_;
  std::shared_ptr<Sequential> downsample_;  ///< null when the shortcut is the identity
};

struct ResNetConfig {
  std::vector<int64_t> blocks;  ///< blocks per stage
  std::vector<int64_t> widths;  ///< channels per stage; the stem has widths[0]
  int64_t num_classes = 10;
  std::string name;
};

class ResNet final : public Module {
 public:
  explicit ResNet(const ResNetConfig& config);
  Tensor forward(const Tensor& input) override;
  std::string describe() const override { return config_.name; }

 protected:
  std::shared_ptr<Module> make_twin() const override { return std::make_shared<ResNet>(config_); }

 private:
  ResNetConfig config_;
  std::shared_ptr<Conv2d> conv1_;
  std::shared_ptr<BatchNorm2d> bn1_;
  std::vector<std::shared_ptr<Sequential>> stages_;  ///< layer1, layer2, ...
  std::shared_ptr<AdaptiveAvgPool2d> avgpool_;
  std::shared_ptr<Linear> fc_;
};

/// Architectures by name: "resnet20", "resnet32", "resnet44", "resnet56", "resnet110", "resnet18".
ResNetConfig resnet_config(const std::string& arch, int64_t num_classes = 10);

/// A ResNet initialised like torchvision's: convolutions kaiming_normal_(fan_out, relu),
/// BatchNorm weight 1 and bias 0, fc PyTorch's Linear default; seeded.
std::shared_ptr<ResNet> make_resnet(const std::string& arch, Generator& generator,
                                    int64_t num_classes = 10);

}  // namespace tandem::nn
