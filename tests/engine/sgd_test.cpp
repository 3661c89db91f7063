#include <gtest/gtest.h>

#include "engine/tandem.h"

namespace tandem {
namespace {

// torch.optim.SGD's update written out for one scalar, as the reference.
struct ReferenceSgd {
  SgdStepOptions options;
  float buffer = 0.0f;
  bool first = true;
  float step(float p, float g) {
    float d = g + options.weight_decay * p;
    if (options.momentum != 0.0f) {
      buffer = first ? d : options.momentum * buffer + (1.0f - options.dampening) * d;
      d = options.nesterov ? d + options.momentum * buffer : buffer;
    }
    first = false;
    return p - options.lr * d;
  }
};

void expect_matches_reference(SgdStepOptions options) {
  Tensor param = from_vector<float>({1.0f, -2.0f}, {2});
  Tensor buffer = zeros({2});
  std::vector<ReferenceSgd> reference(2, ReferenceSgd{options});
  std::vector<float> expected = {1.0f, -2.0f};
  const std::vector<std::vector<float>> grads = {{0.5f, -1.0f}, {0.25f, 0.75f}, {-0.5f, 0.1f}};
  for (size_t step = 0; step < grads.size(); ++step) {
    options.first_step = step == 0;
    sgd_step(param, from_vector(grads[step], {2}), buffer, options);
    for (size_t i = 0; i < 2; ++i) expected[i] = reference[i].step(expected[i], grads[step][i]);
    const std::vector<float> actual = param.to_vector<float>();
    for (size_t i = 0; i < 2; ++i) EXPECT_FLOAT_EQ(actual[i], expected[i]) << "step " << step;
  }
}

TEST(Sgd, PlainStep) {
  expect_matches_reference({.lr = 0.1f});
}
TEST(Sgd, MomentumAndWeightDecay) {
  expect_matches_reference({.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f});
}
TEST(Sgd, Dampening) {
  expect_matches_reference({.lr = 0.05f, .momentum = 0.9f, .dampening = 0.5f});
}
TEST(Sgd, Nesterov) {
  expect_matches_reference({.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f, .nesterov = true});
}

TEST(Sgd, UpdatesInPlaceWithoutRecording) {
  Tensor param = from_vector<float>({1.0f}, {1}, {.requires_grad = true});
  const auto storage = param.storage();
  Tensor buffer = zeros({1});
  sgd_step(param, full({1}, 1.0), buffer, {.lr = 0.5f});
  EXPECT_EQ(param.storage(), storage);
  EXPECT_TRUE(param.is_leaf());
  EXPECT_FLOAT_EQ(param.to_vector<float>()[0], 0.5f);
}

TEST(Sgd, RejectsBadArguments) {
  Tensor param = zeros({2});
  Tensor buffer = zeros({2});
  EXPECT_THROW(sgd_step(param, zeros({3}), buffer, {}), Error);
  EXPECT_THROW(sgd_step(param, zeros({2}), buffer, {.lr = -1.0f}), Error);
  EXPECT_THROW(sgd_step(param, zeros({2}), buffer, {.nesterov = true}), Error);
  Tensor no_buffer;
  EXPECT_THROW(sgd_step(param, zeros({2}), no_buffer, {.momentum = 0.9f}), Error);
  EXPECT_NO_THROW(sgd_step(param, zeros({2}), no_buffer, {.lr = 0.1f}));
}

}  // namespace
}  // namespace tandem
