// A channels-last ResNet (Note [Memory formats]): the format reaches every layer and every
// gradient, no activation is reordered on the way, training follows the NCHW model, and the
// checkpoint holds NCHW values whatever the format in memory.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/cpu/dnnl_context.h"
#include "nn/checkpoint.h"
#include "nn/resnet.h"
#include "nn/safetensors.h"
#include "nn/sgd.h"
#include "tests/support/image_batch.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tensor_compare.h"

namespace tandem::nn {
namespace {

constexpr MemoryFormat kNhwc = MemoryFormat::ChannelsLast;

using Batch = testing::ImageBatch;
using testing::random_image_batch;

std::shared_ptr<ResNet> resnet20(MemoryFormat format) {
  Generator generator(7);
  auto model = make_resnet("resnet20", generator);
  model->to(format);
  return model;
}

TEST(ChannelsLast, ModuleToConvertsFourDimensionalTensorsOnly) {
  const auto model = resnet20(kNhwc);
  for (const auto& [name, tensor] : model->state_dict()) {
    const bool spatial = tensor.dim() == 4 && tensor.size(2) * tensor.size(3) > 1;
    EXPECT_EQ(tensor.memory_format(), spatial ? kNhwc : MemoryFormat::Contiguous) << name;
  }
}

TEST(ChannelsLast, ResNet20StepReordersOnlyWeights) {
  const auto model = resnet20(kNhwc);
  const Batch batch = random_image_batch(8, 1);
  const Tensor images = batch.images.contiguous(kNhwc);
  cross_entropy(model->forward(images), batch.labels).backward();  // warm-up: primitives built
  model->zero_grad();

  int64_t weight_bytes = 0;
  for (const Tensor& p : model->parameters()) weight_bytes += p.dim() == 4 ? p.nbytes() : 0;
  const int64_t before = cpu::dnnl_context::reordered_bytes();
  const Tensor logits = model->forward(images);
  cross_entropy(logits, batch.labels).backward();
  const int64_t reordered = cpu::dnnl_context::reordered_bytes() - before;
  // Each convolution may bring its weights into oneDNN's blocked layout for forward and
  // backward-data and its weight gradient back (3x the weights, a little more for padding to
  // the block). One activation of the first stage alone is 8 x 16 x 32 x 32 x 4 = 512 KiB.
  EXPECT_LE(reordered, 4 * weight_bytes) << "weights: " << weight_bytes << " bytes";
  for (const auto& [name, p] : model->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad().memory_format(), p.memory_format()) << name;
  }
}

TEST(ChannelsLast, ResNet20TrainingFollowsTheNchwModel) {
  // Three SGD steps in train mode (batch statistics) from the same weights on the same batches.
  const auto nchw = resnet20(MemoryFormat::Contiguous);
  const auto nhwc = resnet20(kNhwc);
  const SgdConfig config{.lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f};
  Sgd sgd_nchw(nchw->parameters(), config), sgd_nhwc(nhwc->parameters(), config);
  for (int step = 0; step < 3; ++step) {
    const Batch batch = random_image_batch(16, 10 + step);
    const Tensor loss_nchw = cross_entropy(nchw->forward(batch.images), batch.labels);
    const Tensor loss_nhwc =
        cross_entropy(nhwc->forward(batch.images.contiguous(kNhwc)), batch.labels);
    EXPECT_NEAR(loss_nhwc.item(), loss_nchw.item(), 1e-4 * std::abs(loss_nchw.item()))
        << "step " << step;
    sgd_nchw.zero_grad(), sgd_nhwc.zero_grad();
    loss_nchw.backward(), loss_nhwc.backward();
    sgd_nchw.step(), sgd_nhwc.step();
  }
  // Summation orders differ between the formats' kernels, and three steps of training carry
  // the rounding on: values within 1e-3 of each tensor's largest magnitude, or 1e-4 absolute
  // for the biases, which start at zero and stay near it.
  const auto expected = nchw->state_dict();
  const auto actual = nhwc->state_dict();
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i].second.dtype() != DType::Float32) continue;
    const std::vector<float> a = actual[i].second.to_vector<float>();
    const std::vector<float> e = expected[i].second.to_vector<float>();
    double scale = 0, worst = 0;
    for (size_t k = 0; k < e.size(); ++k) {
      scale = std::max(scale, std::abs(double(e[k])));
      worst = std::max(worst, std::abs(double(a[k]) - e[k]));
    }
    EXPECT_LE(worst, 1e-4 + 1e-3 * scale) << expected[i].first;
  }
}

// A block's output through its children one op at a time: bn2, then the shortcut's add_relu, as
// BasicBlock::forward ran them before its end became one op (BatchNorm2d::forward_add_relu).
Tensor block_by_separate_ops(const BasicBlock& block, const Tensor& x) {
  std::map<std::string, std::shared_ptr<Module>> child(block.children().begin(),
                                                       block.children().end());
  auto& bn1 = dynamic_cast<BatchNorm2d&>(*child.at("bn1"));
  Tensor out = bn1.forward_relu(child.at("conv1")->forward(x));
  out = child.at("bn2")->forward(child.at("conv2")->forward(out));
  return add_relu(out, child.count("downsample") ? child.at("downsample")->forward(x) : x);
}

// The output and every gradient of sum(block(x) * direction), parameters by name, then x's.
std::vector<std::pair<std::string, Tensor>> block_results(
    BasicBlock& block, const Tensor& images,
    const std::function<Tensor(BasicBlock&, const Tensor&)>& forward) {
  block.zero_grad();
  const Tensor x = images.clone().set_requires_grad(true);
  const Tensor y = forward(block, x);
  Generator generator(5);
  sum(mul(y, randn(y.shape(), generator))).backward();
  std::vector<std::pair<std::string, Tensor>> results{{"output", y}};
  for (const auto& [name, p] : block.named_parameters()) results.emplace_back(name, p.grad());
  results.emplace_back("grad input", x.grad());
  return results;
}

// The fused end of a block computes the separate ops' float32 arithmetic in their order
// (BatchNormAddRelu.Float32TrainingEqualsBatchNormThenAddRelu), so a channels-last ResNet block
// trains as before, bit for bit: with the identity shortcut and with the downsampling one.
TEST(ChannelsLast, BasicBlockWithTheFusedEndEqualsTheSeparateOps) {
  for (const auto& [in, out, stride] : {std::tuple{16, 16, 1}, std::tuple{16, 32, 2}}) {
    BasicBlock block({.in_channels = in, .out_channels = out, .stride = stride});
    block.to(kNhwc);
    Generator generator(13);
    const Tensor images = randn({4, in, 8, 8}, generator).contiguous(kNhwc);
    const auto fused =
        block_results(block, images, [](BasicBlock& b, const Tensor& x) { return b.forward(x); });
    const auto separate = block_results(block, images, block_by_separate_ops);
    ASSERT_EQ(fused.size(), separate.size());
    for (size_t i = 0; i < fused.size(); ++i) {
      EXPECT_EQ(fused[i].second.to_vector<float>(), separate[i].second.to_vector<float>())
          << fused[i].first << ", block " << in << " -> " << out;
    }
  }
}

TEST(ChannelsLast, CheckpointHoldsNchwValuesAndLoadsIntoEitherFormat) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "model.safetensors").string();
  const auto nhwc = resnet20(kNhwc);
  save_safetensors(path, nhwc->state_dict());
  // Read back as plain tensors: the model's values, NCHW in the file (a PyTorch NCHW model
  // loads them: tests/interop does so with a channels-last model's checkpoint).
  const NamedTensors file = load_safetensors(path).tensors;
  std::map<std::string, Tensor> by_name(file.begin(), file.end());
  const auto state = nhwc->state_dict();
  ASSERT_EQ(by_name.size(), state.size());
  for (const auto& [name, tensor] : state) {
    ASSERT_TRUE(by_name.count(name)) << name;
    EXPECT_TRUE(by_name[name].is_contiguous()) << name;
    EXPECT_EQ(by_name[name].shape(), tensor.shape()) << name;
    if (tensor.dtype() == DType::Float32) {
      EXPECT_EQ(by_name[name].to_vector<float>(), tensor.to_vector<float>()) << name;
    }
  }

  // Into a channels-last model: the format in memory stays, the values arrive.
  Generator other(99);
  auto target = make_resnet("resnet20", other);
  target->to(kNhwc);
  load_state_dict(*target, file);
  const Tensor conv = target->state_dict()[0].second;  // conv1.weight
  EXPECT_EQ(conv.memory_format(), kNhwc);
  EXPECT_EQ(conv.to_vector<float>(), state[0].second.to_vector<float>());
}

}  // namespace
}  // namespace tandem::nn
