#include "nn/resnet.h"

#include "engine/autograd/grad_mode.h"
#include "nn/default_init.h"
#include "nn/init.h"

namespace tandem::nn {

namespace {

// A ResNet's convolutions: 3×3 or 1×1, "same" padding, no bias (the batch norm after has one).
std::shared_ptr<Conv2d> conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return std::make_shared<Conv2d>(Conv2dConfig{.in_channels = in,
                                               .out_channels = out,
                                               .kernel_size = kernel,
                                               .stride = stride,
                                               .padding = kernel / 2,
                                               .bias = false});
}

std::shared_ptr<BatchNorm2d> batch_norm(int64_t channels) {
  return std::make_shared<BatchNorm2d>(BatchNorm2dConfig{.channels = channels});
}

}  // namespace

BasicBlock::BasicBlock(const BasicBlockConfig& config) : config_(config) {
  const int64_t in = config.in_channels, out = config.out_channels;
  conv1_ = register_module("conv1", conv(in, out, 3, config.stride));
  bn1_ = register_module("bn1", batch_norm(out));
  conv2_ = register_module("conv2", conv(out, out, 3, 1));
  bn2_ = register_module("bn2", batch_norm(out));
  if (config.stride != 1 || in != out) {  // Note [Shortcut] in resnet.h
    downsample_ = register_module("downsample",
                                  std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
                                      conv(in, out, 1, config.stride), batch_norm(out)}));
  }
}

Tensor BasicBlock::forward(const Tensor& input) {
  Tensor out = bn1_->forward_relu((*conv1_)(input));
  out = (*conv2_)(out);
  const Tensor shortcut = downsample_ ? (*downsample_)(input) : input;
  return bn2_->forward_add_relu(out, shortcut);  // bn2, the sum and the ReLU in one pass
}

std::string BasicBlock::describe() const {
  return "BasicBlock(" + std::to_string(config_.in_channels) + " -> " +
         std::to_string(config_.out_channels) + ", stride " + std::to_string(config_.stride) + ")";
}

ResNet::ResNet(const ResNetConfig& config) : config_(config) {
  TANDEM_CHECK(!config.blocks.empty() && config.blocks.size() == config.widths.size(),
               "[ResNet] blocks and widths must have one entry per stage");
  const int64_t stem = config.widths[0];
  conv1_ = register_module("conv1", conv(3, stem, 3, 1));
  bn1_ = register_module("bn1", batch_norm(stem));
  int64_t channels = stem;
  for (size_t s = 0; s < config.blocks.size(); ++s) {
    auto stage = std::make_shared<Sequential>();
    for (int64_t b = 0; b < config.blocks[s]; ++b) {
      const int64_t stride = (s > 0 && b == 0) ? 2 : 1;  // each later stage halves the resolution
      stage->push_back(std::make_shared<BasicBlock>(BasicBlockConfig{
          .in_channels = channels, .out_channels = config.widths[s], .stride = stride}));
      channels = config.widths[s];
    }
    stages_.push_back(register_module("layer" + std::to_string(s + 1), stage));
  }
  avgpool_ = register_module("avgpool", std::make_shared<AdaptiveAvgPool2d>(1, 1));
  fc_ = register_module("fc", std::make_shared<Linear>(LinearConfig{
                                  .in_features = channels, .out_features = config.num_classes}));
}

Tensor ResNet::forward(const Tensor& input) {
  TANDEM_CHECK(input.dim() == 4 && input.size(1) == 3, "[", config_.name,
               "] expects (N, 3, H, W) images, got ", shape_str(input.shape()));
  Tensor x = bn1_->forward_relu((*conv1_)(input));
  for (const auto& stage : stages_) x = (*stage)(x);
  return (*fc_)((*avgpool_)(x).flatten(1));
}

ResNetConfig resnet_config(const std::string& arch, int64_t num_classes) {
  if (arch == "resnet18") return {{2, 2, 2, 2}, {64, 128, 256, 512}, num_classes, arch};
  for (int depth : {20, 32, 44, 56, 110}) {
    if (arch == "resnet" + std::to_string(depth)) {
      const int64_t n = (depth - 2) / 6;
      return {{n, n, n}, {16, 32, 64}, num_classes, arch};
    }
  }
  TANDEM_FAIL("[resnet] unknown architecture '", arch,
              "': expected resnet20, resnet32, resnet44, resnet56, resnet110 or resnet18");
}

std::shared_ptr<ResNet> make_resnet(const std::string& arch, Generator& generator,
                                    int64_t num_classes) {
  std::shared_ptr<ResNet> model;
  {
    const SkipDefaultInit drawn_from_generator_below;
    model = std::make_shared<ResNet>(resnet_config(arch, num_classes));
  }
  model->reset_parameters(generator);
  NoGradGuard no_grad;
  for (const auto& [name, parameter] : model->named_parameters()) {
    if (parameter.dim() == 4) init::kaiming_normal_fan_out_(parameter, generator);
  }
  return model;
}

}  // namespace tandem::nn
