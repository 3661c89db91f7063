#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/tandem.h"
#include "nn/lr_schedule.h"
#include "nn/resnet.h"
#include "nn/sgd.h"

namespace tandem::nn {
namespace {

TEST(LrSchedule, MultiStepFollowsThePaper) {
  const MultiStepLr schedule = MultiStepLr::paper(0.1f, 100);
  EXPECT_FLOAT_EQ(schedule.lr_at(0), 0.1f);
  EXPECT_FLOAT_EQ(schedule.lr_at(49), 0.1f);
  EXPECT_FLOAT_EQ(schedule.lr_at(50), 0.01f);
  EXPECT_FLOAT_EQ(schedule.lr_at(74), 0.01f);
  EXPECT_FLOAT_EQ(schedule.lr_at(75), 0.001f);
}

TEST(LrSchedule, Cosine) {
  const CosineLr schedule(0.1f, 100, 0.0f);
  EXPECT_FLOAT_EQ(schedule.lr_at(0), 0.1f);
  EXPECT_NEAR(schedule.lr_at(50), 0.05f, 1e-7);
  EXPECT_NEAR(schedule.lr_at(25), 0.05 * (1 + std::cos(M_PI / 4)), 1e-7);
  EXPECT_NEAR(schedule.lr_at(100), 0.0f, 1e-9);
}

TEST(LrSchedule, OneCycleMatchesTorch) {
  // torch.optim.lr_scheduler.OneCycleLR(max_lr=0.1, total_steps=100) values.
  const OneCycleLr schedule(0.1f, 100);
  EXPECT_NEAR(schedule.lr_at(0), 0.004f, 1e-8);
  EXPECT_NEAR(schedule.lr_at(29), 0.1f, 1e-8);
  EXPECT_NEAR(schedule.lr_at(64), (0.1 + 4e-7) / 2, 1e-7);
  EXPECT_NEAR(schedule.lr_at(99), 4e-7, 1e-10);
}

TEST(LrSchedule, WarmupThenInner) {
  const WarmupLr schedule(std::make_shared<CosineLr>(0.1f, 100), 10, 0.1f);
  EXPECT_FLOAT_EQ(schedule.lr_at(0), 0.01f);
  EXPECT_FLOAT_EQ(schedule.lr_at(5), 0.055f);
  EXPECT_FLOAT_EQ(schedule.lr_at(10), 0.1f);
  EXPECT_NEAR(schedule.lr_at(60), 0.05f, 1e-7);
}

TEST(Sgd, SkipsParametersWithoutGradientsAndCanSkipDecay) {
  Tensor weight = from_vector<float>({1, 1, 1, 1}, {2, 2}, {.requires_grad = true});
  Tensor bias = from_vector<float>({1, 1}, {2}, {.requires_grad = true});
  Tensor unused = from_vector<float>({1}, {1}, {.requires_grad = true});
  Sgd sgd({weight, bias, unused},
          {.lr = 0.5f, .weight_decay = 0.1f, .no_decay_for_bn_and_bias = true});
  weight.set_grad(zeros({2, 2}));
  bias.set_grad(zeros({2}));
  sgd.step();
  EXPECT_FLOAT_EQ(weight.to_vector<float>()[0], 1.0f - 0.5f * 0.1f);  // decayed
  EXPECT_FLOAT_EQ(bias.to_vector<float>()[0], 1.0f);                  // 1-D: not decayed
  EXPECT_FLOAT_EQ(unused.to_vector<float>()[0], 1.0f);                // no gradient: untouched
  EXPECT_FALSE(sgd.momentum_buffers()[0].defined());                  // no momentum, no buffer
  sgd.zero_grad();
  EXPECT_FALSE(weight.grad().defined());
  EXPECT_THROW(sgd.set_lr(-1.0f), Error);
  EXPECT_THROW(Sgd({weight}, {.nesterov = true}), Error);
}

// Sgd::step groups parameters into sgd_step_multi calls; the result must be what one
// sgd_step per parameter gives, bit for bit, including a parameter whose first gradient comes a
// step later (its own first step), undecayed 1-D parameters and a parameter left without one.
TEST(Sgd, MatchesOneEngineStepPerParameter) {
  const SgdConfig config{.lr = 0.1f,
                         .momentum = 0.9f,
                         .weight_decay = 5e-4f,
                         .nesterov = true,
                         .no_decay_for_bn_and_bias = true};
  Generator generator(11);
  const std::vector<Shape> shapes = {{16, 3, 3, 3}, {16}, {10, 64}, {10}, {4097}};
  std::vector<Tensor> params, reference, buffers(shapes.size());
  for (const Shape& shape : shapes) {
    params.push_back(randn(shape, generator));
    reference.push_back(params.back().clone());
  }
  Sgd sgd(params, config);
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      const bool late = i == 2 && step == 0;   // parameter 2 gets its first gradient at step 1
      const bool never = i == 4 && step == 1;  // parameter 4 has no gradient at step 1
      if (late || never) {
        params[i].set_grad(Tensor());
        continue;
      }
      const Tensor grad = randn(shapes[i], generator);
      params[i].set_grad(grad);
      const bool first_step = !buffers[i].defined();
      if (first_step) buffers[i] = zeros(shapes[i]);
      sgd_step(reference[i], grad, buffers[i],
               {.lr = config.lr,
                .momentum = config.momentum,
                .weight_decay = shapes[i].size() > 1 ? config.weight_decay : 0.0f,
                .nesterov = config.nesterov,
                .first_step = first_step});
    }
    sgd.step();
    for (size_t i = 0; i < shapes.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(step) + ", parameter " + std::to_string(i));
      EXPECT_EQ(params[i].to_vector<float>(), reference[i].to_vector<float>());
      ASSERT_EQ(sgd.momentum_buffers()[i].defined(), buffers[i].defined());
      if (buffers[i].defined()) {
        EXPECT_EQ(sgd.momentum_buffers()[i].to_vector<float>(), buffers[i].to_vector<float>());
      }
    }
  }
}

// The check that the model can learn at all: ResNet-20 memorises 256 fixed images.
TEST(TrainingSlow, ResNet20OverfitsASmallBatch) {
  Generator generator(42);
  const auto model = make_resnet("resnet20", generator);
  const Tensor images = randn({256, 3, 32, 32}, generator);
  std::vector<int64_t> label_values(256);
  for (size_t i = 0; i < label_values.size(); ++i)
    label_values[i] = static_cast<int64_t>(generator.next_u64() % 10);
  const Tensor labels = from_vector(label_values, {256}, {.dtype = DType::Int64});
  Sgd sgd(model->parameters(), {.lr = 0.05f, .momentum = 0.9f});
  double first_loss = 0.0, last_loss = 0.0;
  for (int step = 0; step < 40; ++step) {
    sgd.zero_grad();
    const Tensor loss = cross_entropy((*model)(images), labels);
    loss.backward();
    sgd.step();
    (step == 0 ? first_loss : last_loss) = loss.item();
  }
  model->eval();
  NoGradGuard no_grad;
  const double accuracy = count_correct((*model)(images), labels).item() / 256.0;
  EXPECT_LT(last_loss, 0.25 * first_loss) << "first " << first_loss << ", last " << last_loss;
  EXPECT_GT(accuracy, 0.9) << "train-set accuracy in eval mode";
}

}  // namespace
}  // namespace tandem::nn
