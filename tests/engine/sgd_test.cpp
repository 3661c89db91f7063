#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

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

// --- sgd_step_multi: the same update as sgd_step, bit for bit, for a list of parameters.

std::vector<float> values(const Tensor& t) {
  return t.to_vector<float>();
}

// Three steps over parameters of `sizes` elements, once through sgd_step per tensor and once
// through sgd_step_multi; params and momentum buffers must agree exactly after every step.
void expect_multi_equals_single(const SgdStepOptions& variant, const std::vector<int64_t>& sizes) {
  Generator generator(17);
  std::vector<Tensor> single_params, single_buffers;
  std::vector<SgdTensors> multi;
  for (int64_t n : sizes) {
    const Tensor p = randn({n}, generator);
    single_params.push_back(p.clone());
    single_buffers.push_back(variant.momentum != 0.0f ? zeros({n}) : Tensor());
    multi.push_back({p.clone(), Tensor(), variant.momentum != 0.0f ? zeros({n}) : Tensor()});
  }
  for (int step = 0; step < 3; ++step) {
    SgdStepOptions options = variant;
    options.first_step = step == 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const Tensor grad = randn({sizes[i]}, generator);
      sgd_step(single_params[i], grad, single_buffers[i], options);
      multi[i].grad = grad;
    }
    sgd_step_multi(multi, options);
    for (size_t i = 0; i < sizes.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(step) + ", tensor " + std::to_string(i));
      EXPECT_EQ(values(multi[i].param), values(single_params[i]));
      if (variant.momentum != 0.0f) {
        EXPECT_EQ(values(multi[i].momentum_buffer), values(single_buffers[i]));
      }
    }
  }
}

const SgdStepOptions kVariants[] = {
    {.lr = 0.1f},
    {.lr = 0.1f, .weight_decay = 5e-4f},
    {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f},
    {.lr = 0.05f, .momentum = 0.9f, .dampening = 0.5f},
    {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f, .nesterov = true},
};

TEST(SgdMulti, EqualsPerTensorStepsBitForBit) {
  for (const SgdStepOptions& variant : kVariants) {
    SCOPED_TRACE("momentum " + std::to_string(variant.momentum) + ", dampening " +
                 std::to_string(variant.dampening) + ", nesterov " +
                 std::to_string(variant.nesterov));
    expect_multi_equals_single(variant, {1, 7, 1000, 4097});
  }
}

TEST(SgdMulti, LargeTensorAndManySmallOnes) {
  // One tensor past the CPU kernel's parallel grain, and more tensors than one CUDA launch takes.
  std::vector<int64_t> sizes(70, 3);
  sizes[5] = (1 << 15) + 3;
  sizes[40] = 0;
  expect_multi_equals_single(kVariants[2], sizes);
}

TEST(SgdMulti, EmptyListIsANoOp) {
  EXPECT_NO_THROW(sgd_step_multi({}, {.lr = 0.1f}));
}

TEST(SgdMulti, RejectsBadArgumentsNamingTheTensor) {
  const auto message = [](const std::vector<SgdTensors>& tensors, const SgdStepOptions& options) {
    try {
      sgd_step_multi(tensors, options);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // A valid first tensor: were it updated before the bad one is found, it would change.
  const SgdTensors good{ones({2}), ones({2}), zeros({2})};
  const std::string bad_grad = message({good, {zeros({2}), zeros({3}), zeros({2})}}, {});
  EXPECT_NE(bad_grad.find("[sgd_step_multi] grad 1 has shape"), std::string::npos) << bad_grad;
  const std::string no_buffer =
      message({good, {zeros({2}), zeros({2}), Tensor()}}, {.momentum = 0.9f});
  EXPECT_NE(no_buffer.find("momentum_buffer 1"), std::string::npos) << no_buffer;
  const std::string bad_lr = message({good}, {.lr = -1.0f});
  EXPECT_NE(bad_lr.find("[sgd_step_multi] lr"), std::string::npos) << bad_lr;
  EXPECT_NE(message({good}, {.nesterov = true}).find("Nesterov"), std::string::npos);
  const TensorOptions on_cpu1{.device = Device::cpu(1)};
  const std::string two_devices =
      message({good, {zeros({2}, on_cpu1), zeros({2}, on_cpu1), Tensor()}}, {});
  EXPECT_NE(two_devices.find("different devices"), std::string::npos) << two_devices;
  EXPECT_EQ(values(good.param), std::vector<float>(2, 1.0f));
}

// What a gradient scaler's unscale runs (Note [Finding inf and NaN] in engine/ops/optim.cpp).
float found_in(const std::vector<Tensor>& grads, float inv_scale = 0.5f) {
  Tensor found_inf = zeros({1});
  non_finite_check_and_unscale_(grads, found_inf, inv_scale);
  return static_cast<float>(found_inf.item());
}

TEST(NonFiniteCheckAndUnscale, FindsInfAndNanInAnyGradientAndUnscalesInPlace) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  constexpr float kMax = std::numeric_limits<float>::max();
  Tensor finite = from_vector<float>({3.0f, -kMax, 0.0f, 1e-30f}, {4});
  EXPECT_EQ(found_in({finite}), 0.0f);  // the largest float is finite, and its sum is not taken
  EXPECT_EQ(finite.to_vector<float>(), (std::vector<float>{1.5f, -kMax / 2, 0.0f, 0.5e-30f}));
  for (const float bad : {kInf, -kInf, kNan}) {
    Tensor clean = from_vector<float>({2.0f}, {1});
    Tensor poisoned = from_vector<float>({1.0f, bad, 4.0f}, {3});
    EXPECT_EQ(found_in({clean, poisoned}), 1.0f) << bad;
    EXPECT_EQ(clean.to_vector<float>()[0], 1.0f) << "every gradient is unscaled all the same";
    EXPECT_EQ(poisoned.to_vector<float>()[2], 2.0f);
  }
  // A channels-last gradient is walked in its own memory, in place.
  Tensor image = full({2, 3, 2, 2}, 4.0f).contiguous(MemoryFormat::ChannelsLast);
  EXPECT_EQ(found_in({image}), 0.0f);
  EXPECT_EQ(image.to_vector<float>(), std::vector<float>(24, 2.0f));
  EXPECT_EQ(image.memory_format(), MemoryFormat::ChannelsLast);
}

TEST(NonFiniteCheckAndUnscale, AddsToTheFlagAndReadsNothingOnTheHost) {
  Tensor found_inf = zeros({1});
  Tensor grad = from_vector<float>({std::numeric_limits<float>::infinity(), 8.0f}, {2});
  const int64_t reads = host_read_count();
  non_finite_check_and_unscale_({grad}, found_inf, 1.0f);  // 1: left as it is
  non_finite_check_and_unscale_({}, found_inf, 0.5f);      // nothing to check
  EXPECT_EQ(host_read_count(), reads);
  EXPECT_EQ(found_inf.item(), 1.0f);
  EXPECT_EQ(grad.to_vector<float>()[1], 8.0f);
}

TEST(NonFiniteCheckAndUnscale, RejectsBadArguments) {
  Tensor found_inf = zeros({1});
  Tensor wide = zeros({2});
  Tensor half = zeros({2}, {.dtype = DType::BFloat16});
  EXPECT_THROW(non_finite_check_and_unscale_({half}, found_inf, 0.5f), Error);
  EXPECT_THROW(non_finite_check_and_unscale_({}, wide, 0.5f), Error);
}

}  // namespace
}  // namespace tandem
