#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/tandem.h"
#include "tests/support/error_message.h"
#include "tests/support/gradcheck.h"
#include "tests/support/reference_ops.h"
#include "tests/support/tensor_compare.h"

namespace tandem {
namespace {

using testing::error_message;

using testing::check_gradients;
using testing::expect_close_elementwise;
using Inputs = std::vector<Tensor>;

Tensor random(const Shape& shape, uint64_t seed, bool requires_grad = false, float mean = 0.0f) {
  Generator generator(seed);
  return randn(shape, generator, {.requires_grad = requires_grad}, mean);
}

struct BatchNormShape {
  int64_t n, c, h, w;
};
void PrintTo(const BatchNormShape& s, std::ostream* out) {
  *out << "x [" << s.n << ", " << s.c << ", " << s.h << ", " << s.w << "]";
}

class BatchNormAgainstReference : public ::testing::TestWithParam<BatchNormShape> {};

TEST_P(BatchNormAgainstReference, TrainingForwardAndBackward) {
  const auto [n, c, h, w] = GetParam();
  // Mean 2, not 0, so that statistics which assumed centred data would show.
  const Tensor x = random({n, c, h, w}, 1, true, 2.0f);
  const Tensor gamma = random({c}, 2, true, 1.0f);
  const Tensor beta = random({c}, 3, true);
  const Tensor y = batch_norm2d(x, gamma, beta, Tensor(), Tensor(), {.training = true});
  const auto xv = x.to_vector<float>(), gv = gamma.to_vector<float>();
  std::vector<float> mean, var;
  // Tolerance: float32 statistics over up to N·H·W = 192 values against a double reference.
  expect_close_elementwise(
      y.to_vector<float>(),
      testing::reference_batch_norm(n, c, h * w, xv, gv, beta.to_vector<float>(), 1e-5f, mean, var),
      1e-4f, "forward");

  const Tensor grad_y = random(y.shape(), 4);
  sum(mul(y, grad_y)).backward();
  std::vector<float> grad_x, grad_gamma, grad_beta;
  testing::reference_batch_norm_backward(n, c, h * w, xv, gv, grad_y.to_vector<float>(), 1e-5f,
                                         grad_x, grad_gamma, grad_beta);
  expect_close_elementwise(x.grad().to_vector<float>(), grad_x, 1e-4f, "grad input");
  expect_close_elementwise(gamma.grad().to_vector<float>(), grad_gamma, 1e-4f, "grad gamma");
  expect_close_elementwise(beta.grad().to_vector<float>(), grad_beta, 1e-4f, "grad beta");
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormAgainstReference,
                         ::testing::Values(BatchNormShape{3, 16, 8, 8},  // a ResNet-20 stage
                                           BatchNormShape{1, 4, 5, 7},   // batch 1, odd sizes
                                           BatchNormShape{4, 3, 5, 6},
                                           BatchNormShape{8, 2, 1, 1}));  // after global pooling

// Note [Batch norm on NCHW]: a channel whose mean dwarfs its spread (8 against 0.01) is where
// statistics that cancel go wrong; both layouts must give the same gradients there.
TEST(BatchNorm, NchwAndChannelsLastAgreeWhenTheMeanDwarfsTheSpread) {
  const Tensor x0 = add(mul(random({16, 64, 8, 8}, 1), full({1}, 0.01)), full({1}, 8.0));
  const Tensor grad_y = random({16, 64, 8, 8}, 2);
  std::vector<std::vector<float>> grad_x, grad_gamma;
  for (MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
    Tensor x = x0.contiguous(format).detach();
    x.set_requires_grad(true);
    Tensor gamma = ones({64}, {.requires_grad = true});
    const Tensor beta = zeros({64}, {.requires_grad = true});
    const Tensor y = batch_norm2d(x, gamma, beta, Tensor(), Tensor(), {.training = true});
    sum(mul(y, grad_y.contiguous(format))).backward();
    grad_x.push_back(x.grad().contiguous().to_vector<float>());
    grad_gamma.push_back(gamma.grad().to_vector<float>());
  }
  expect_close_elementwise(grad_x[0], grad_x[1], 1e-3f, "grad input");
  expect_close_elementwise(grad_gamma[0], grad_gamma[1], 1e-3f, "grad gamma");
}

TEST(BatchNorm, RunningStatisticsFollowPyTorch) {
  // Two steps with momentum 0.1; running_var keeps the unbiased variance.
  Tensor running_mean = zeros({2});
  Tensor running_var = ones({2});
  const auto storage = running_mean.storage();
  std::vector<double> expected_mean = {0, 0}, expected_var = {1, 1};
  for (uint64_t step = 0; step < 2; ++step) {
    const Tensor x = random({3, 2, 2, 2}, 10 + step, false, 1.5f);
    batch_norm2d(x, Tensor(), Tensor(), running_mean, running_var,
                 {.training = true, .momentum = 0.1f});
    std::vector<float> mean, var;
    testing::reference_batch_norm(3, 2, 4, x.to_vector<float>(), {1, 1}, {0, 0}, 1e-5f, mean, var);
    for (size_t c = 0; c < 2; ++c) {
      expected_mean[c] = 0.9 * expected_mean[c] + 0.1 * mean[c];
      expected_var[c] = 0.9 * expected_var[c] + 0.1 * var[c] * 12.0 / 11.0;
    }
  }
  EXPECT_EQ(running_mean.storage(), storage) << "running stats must be updated in place";
  const auto rm = running_mean.to_vector<float>(), rv = running_var.to_vector<float>();
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_NEAR(rm[c], expected_mean[c], 1e-5);
    EXPECT_NEAR(rv[c], expected_var[c], 1e-5);
  }
}

// Note [Running statistics]: the CPU backend updates them with the arithmetic of the elementwise
// ops that the front-end composed before (mul, mul, add; the unbiased factor a float32 mul), bit
// for bit, on every path: oneDNN on NCHW float32 and bfloat16, the own channels-last kernels with
// and without the fused ReLU.
TEST(BatchNorm, RunningStatisticsAreWhatTheComposedOpsGave) {
  struct Case {
    const char* what;
    DType dtype;
    MemoryFormat format;
    bool relu;
  };
  const Case cases[] = {{"nchw", DType::Float32, MemoryFormat::Contiguous, false},
                        {"nchw bfloat16", DType::BFloat16, MemoryFormat::Contiguous, false},
                        {"channels-last", DType::Float32, MemoryFormat::ChannelsLast, false},
                        {"channels-last relu", DType::Float32, MemoryFormat::ChannelsLast, true}};
  const float momentum = 0.3f;
  for (const Case& c : cases) {
    const Tensor x = random({5, 3, 3, 4}, 21, false, 1.5f).to(c.dtype).contiguous(c.format);
    Tensor running_mean = random({3}, 22), running_var = add(random({3}, 23), 3.0f);
    const Tensor mean_before = running_mean.clone(), var_before = running_var.clone();
    batch_norm2d(x, Tensor(), Tensor(), running_mean, running_var,
                 {.momentum = momentum, .fuse_relu = c.relu});
    // The batch statistics as the backend computes them, without running statistics.
    Tensor mean = empty({3}), var = empty({3}), y = empty_like(x);
    backend_for(Device::cpu())
        .batch_norm_forward_training(x, ones({3}), zeros({3}), {}, 1e-5f, y, mean, var);
    const float unbiased = 60.0f / 59.0f;  // count 5 * 3 * 4
    const Tensor expected_mean = add(mul(mean_before, 1.0f - momentum), mul(mean, momentum));
    const Tensor expected_var =
        add(mul(var_before, 1.0f - momentum), mul(mul(var, unbiased), momentum));
    EXPECT_EQ(running_mean.to_vector<float>(), expected_mean.to_vector<float>()) << c.what;
    EXPECT_EQ(running_var.to_vector<float>(), expected_var.to_vector<float>()) << c.what;
  }
}

// Note [NaN through ReLU and max pooling]: the ReLU fused into batch norm lets a NaN through as
// ReLU itself does: a NaN in one channel's input makes that channel's statistics and outputs NaN,
// not 0, and leaves the other channels alone.
TEST(BatchNorm, ANaNGoesThroughTheFusedRelu) {
  for (const MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
    std::vector<float> values = random({2, 2, 3, 3}, 31).to_vector<float>();
    values[9 + 4] = NAN;  // image 0, channel 1
    const Tensor x = from_vector(values, {2, 2, 3, 3}).contiguous(format);
    Tensor running_mean = zeros({2}), running_var = ones({2});
    const std::vector<float> y =
        batch_norm2d(x, ones({2}), zeros({2}), running_mean, running_var, {.fuse_relu = true})
            .contiguous()
            .to_vector<float>();
    for (int n = 0; n < 2; ++n) {
      for (int i = 0; i < 9; ++i) {
        EXPECT_FALSE(std::isnan(y[n * 18 + i])) << "channel 0, image " << n << ", value " << i;
        EXPECT_TRUE(std::isnan(y[n * 18 + 9 + i])) << "channel 1, image " << n << ", value " << i;
      }
    }
  }
}

TEST(BatchNorm, InferenceUsesRunningStatistics) {
  const Tensor x = random({2, 2, 3, 3}, 4);
  const Tensor gamma = from_vector<float>({2, 0.5f}, {2});
  const Tensor beta = from_vector<float>({1, -1}, {2});
  const Tensor running_mean = from_vector<float>({0.5f, -0.25f}, {2});
  const Tensor running_var = from_vector<float>({4, 0.25f}, {2});
  const auto y = batch_norm2d(x, gamma, beta, running_mean, running_var, {.training = false})
                     .to_vector<float>();
  const auto xv = x.to_vector<float>();
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t c = (i / 9) % 2;
    const float expected = c == 0 ? (xv[i] - 0.5f) / std::sqrt(4.0f + 1e-5f) * 2 + 1
                                  : (xv[i] + 0.25f) / std::sqrt(0.25f + 1e-5f) * 0.5f - 1;
    EXPECT_NEAR(y[i], expected, 1e-5f) << i;
  }
  // Inference leaves the running statistics alone.
  EXPECT_EQ(running_var.to_vector<float>(), (std::vector<float>{4, 0.25f}));
}

TEST(BatchNorm, EvalEqualsTrainWhenRunningStatisticsAreTheBatchStatistics) {
  const Tensor x = random({3, 4, 3, 5}, 12, false, -1.0f);
  const Tensor gamma = random({4}, 13, false, 1.0f);
  const Tensor beta = random({4}, 14);
  std::vector<float> mean, var;
  testing::reference_batch_norm(3, 4, 15, x.to_vector<float>(), gamma.to_vector<float>(),
                                beta.to_vector<float>(), 1e-5f, mean, var);
  // Training normalises with the BIASED batch variance, so that is what eval must be given.
  const Tensor running_mean = from_vector(mean, {4});
  const Tensor running_var = from_vector(var, {4});
  const auto train =
      batch_norm2d(x, gamma, beta, Tensor(), Tensor(), {.training = true}).to_vector<float>();
  const auto eval = batch_norm2d(x, gamma, beta, running_mean, running_var, {.training = false})
                        .to_vector<float>();
  expect_close_elementwise(eval, train, 1e-5f, "eval vs train");
}

TEST(BatchNorm, WithoutAffineParametersNormalisesOnly) {
  const Tensor x = random({2, 3, 4, 4}, 15, true, 0.5f);
  const Tensor y = batch_norm2d(x, Tensor(), Tensor(), Tensor(), Tensor(), {.training = true});
  std::vector<float> mean, var;
  expect_close_elementwise(y.to_vector<float>(),
                           testing::reference_batch_norm(2, 3, 16, x.to_vector<float>(), {1, 1, 1},
                                                         {0, 0, 0}, 1e-5f, mean, var),
                           1e-4f, "forward");
  EXPECT_TRUE(check_gradients(
      [](const Inputs& in) {
        return batch_norm2d(in[0], Tensor(), Tensor(), Tensor(), Tensor(), {.training = true});
      },
      {x}));
}

TEST(BatchNorm, EachEpsGetsItsOwnPrimitive) {
  // Zero running variance: y = (x - mean) / sqrt(eps), so a cached primitive built for another
  // eps shows up as a factor sqrt(10) here (1e-7 and 1e-8 print alike with 6 decimals).
  const Tensor x = from_vector<float>({1e-4f, -2e-4f, 3e-4f, 0.0f}, {1, 1, 2, 2});
  const Tensor zero = zeros({1});
  for (float eps : {1e-7f, 1e-8f}) {
    const auto y = batch_norm2d(x, Tensor(), Tensor(), zero, zero, {.training = false, .eps = eps})
                       .to_vector<float>();
    const auto xv = x.to_vector<float>();
    for (size_t i = 0; i < xv.size(); ++i) {
      EXPECT_NEAR(y[i], xv[i] / std::sqrt(eps), 1e-3f) << "eps " << eps << " at " << i;
    }
  }
}

TEST(BatchNormGrad, TrainingFiniteDifferences) {
  const Tensor x = random({3, 2, 3, 2}, 5, true);
  const Tensor gamma = random({2}, 6, true, 1.0f);
  const Tensor beta = random({2}, 7, true);
  EXPECT_TRUE(check_gradients(
      [](const Inputs& in) {
        return batch_norm2d(in[0], in[1], in[2], Tensor(), Tensor(), {.training = true});
      },
      {x, gamma, beta}));
}

TEST(BatchNormGrad, InferenceFiniteDifferences) {
  const Tensor x = random({2, 3, 2, 2}, 8, true);
  const Tensor gamma = random({3}, 9, true, 1.0f);
  const Tensor beta = random({3}, 10, true);
  const Tensor running_mean = random({3}, 11);
  const Tensor running_var = from_vector<float>({0.5f, 1.0f, 2.0f}, {3});
  EXPECT_TRUE(check_gradients(
      [&](const Inputs& in) {
        return batch_norm2d(in[0], in[1], in[2], running_mean, running_var, {.training = false});
      },
      {x, gamma, beta}));
}

TEST(BatchNorm, BadArgumentsAreClearErrors) {
  const Tensor x = zeros({2, 3, 4, 4});
  const Tensor none;
  const std::vector<std::pair<std::string, std::function<void()>>> cases = {
      {"[batch_norm2d] input has 3 dims",
       [&] {
         batch_norm2d(zeros({2, 3, 4}), none, none, none, none);
       }},
      {"[batch_norm2d] input is int64",
       [&] {
         batch_norm2d(zeros({2, 3, 4, 4}, {.dtype = DType::Int64}), none, none, none, none);
       }},
      {"[batch_norm2d] weight has shape [4], expected [3]",
       [&] { batch_norm2d(x, zeros({4}), none, none, none); }},
      {"[batch_norm2d] bias is int64",
       [&] { batch_norm2d(x, none, zeros({3}, {.dtype = DType::Int64}), none, none); }},
      {"[batch_norm2d] give both running_mean and running_var",
       [&] { batch_norm2d(x, none, none, zeros({3}), none); }},
      {"[batch_norm2d] inference needs running_mean and running_var",
       [&] { batch_norm2d(x, none, none, none, none, {.training = false}); }},
      {"[batch_norm2d] training needs more than one value per channel",
       [&] {
         batch_norm2d(zeros({1, 3, 1, 1}), none, none, none, none);
       }},
      {"[batch_norm2d] tensors on different devices",
       [&] { batch_norm2d(x, zeros({3}, {.device = Device::cpu(1)}), none, none, none); }},
  };
  for (const auto& [expected, call] : cases) {
    EXPECT_NE(error_message(call).find(expected), std::string::npos)
        << "expected \"" << expected << "\", got \"" << error_message(call) << "\"";
  }
}

}  // namespace
}  // namespace tandem
