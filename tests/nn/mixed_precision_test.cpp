// A model in mixed precision (Note [Mixed precision] in nn/precision.h): what stays float32,
// what becomes bfloat16, and that it trains as float32 does.

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/tandem.h"
#include "nn/resnet.h"
#include "nn/sgd.h"
#include "tests/support/image_batch.h"

namespace tandem::nn {
namespace {

using testing::random_image_batch;

std::shared_ptr<ResNet> resnet20(Precision precision, MemoryFormat format) {
  Generator generator(7);
  auto model = make_resnet("resnet20", generator);
  model->set_precision(precision);
  model->to(format);
  return model;
}

TEST(MixedPrecision, ActivationsAreBf16WhileParametersLogitsAndGradientsStayFloat32) {
  auto model = resnet20(Precision::BFloat16, MemoryFormat::ChannelsLast);
  EXPECT_EQ(model->precision(), Precision::BFloat16);
  const auto batch = random_image_batch(4, 1);
  const Tensor images = batch.images.contiguous(MemoryFormat::ChannelsLast);
  // The stem's convolution hands its batch norm a bfloat16 activation.
  const auto& stem = model->children().front().second;
  EXPECT_EQ(stem->forward(images).dtype(), DType::BFloat16);
  const Tensor logits = model->forward(images);
  EXPECT_EQ(logits.dtype(), DType::Float32) << "the loss takes float32 logits";
  cross_entropy(logits, batch.labels).backward();
  for (const auto& [name, parameter] : model->named_parameters()) {
    EXPECT_EQ(parameter.dtype(), DType::Float32) << name;
    ASSERT_TRUE(parameter.grad().defined()) << name;
    EXPECT_EQ(parameter.grad().dtype(), DType::Float32) << name;
  }
  for (const auto& [name, buffer] : model->named_buffers()) {
    if (name.find("num_batches_tracked") == std::string::npos) {
      EXPECT_EQ(buffer.dtype(), DType::Float32) << name;
    }
  }
}

TEST(MixedPrecision, ReplicasAndClonesKeepThePrecision) {
  auto model = resnet20(Precision::BFloat16, MemoryFormat::Contiguous);
  const auto twin = model->clone();
  EXPECT_EQ(twin->precision(), Precision::BFloat16);
  for (const auto& [name, child] : twin->children()) {
    EXPECT_EQ(child->precision(), Precision::BFloat16) << name;
  }
  model->set_precision(Precision::Float32);
  EXPECT_EQ(model->children().back().second->precision(), Precision::Float32);
}

// Losses of `steps` SGD steps on one batch, from the same weights.
std::vector<double> losses(Precision precision, MemoryFormat format, int steps) {
  auto model = resnet20(precision, format);
  const auto batch = random_image_batch(32, 3);
  const Tensor images = batch.images.contiguous(format);
  Sgd sgd(model->parameters(), {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f});
  std::vector<double> out;
  for (int step = 0; step < steps; ++step) {
    sgd.zero_grad();
    Tensor loss = cross_entropy(model->forward(images), batch.labels);
    loss.backward();
    sgd.step();
    out.push_back(loss.item());
  }
  return out;
}

// bfloat16 keeps 8 significant bits, so single steps differ by about a percent, and the
// difference grows as training amplifies it; what must hold is that the loss falls as fast.
void expect_trains_as_float32(MemoryFormat format) {
  const int steps = 12;
  const auto fp32 = losses(Precision::Float32, format, steps);
  const auto bf16 = losses(Precision::BFloat16, format, steps);
  EXPECT_NEAR(bf16[0], fp32[0], 0.02 * fp32[0]) << "the first forward: same weights, same batch";
  EXPECT_LT(fp32[steps - 1], 0.5 * fp32[0]);
  EXPECT_LT(bf16[steps - 1], 0.5 * bf16[0]);
  for (int step = 0; step < steps; ++step) {
    EXPECT_NEAR(bf16[step], fp32[step], 0.1 * fp32[step] + 0.05) << "step " << step;
  }
}

TEST(MixedPrecision, ResNet20LossFallsAsInFloat32ChannelsLast) {
  expect_trains_as_float32(MemoryFormat::ChannelsLast);
}

TEST(MixedPrecision, ResNet20LossFallsAsInFloat32Nchw) {
  expect_trains_as_float32(MemoryFormat::Contiguous);
}

}  // namespace
}  // namespace tandem::nn
