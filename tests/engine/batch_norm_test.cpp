#include <gtest/gtest.h>

#include "engine/tandem.h"
#include "tests/support/gradcheck.h"
#include "tests/support/reference_ops.h"

namespace tandem {
namespace {

using testing::check_gradients;
using Inputs = std::vector<Tensor>;

Tensor random(const Shape& shape, uint64_t seed, bool requires_grad = false, float mean = 0.0f) {
  Generator generator(seed);
  return randn(shape, generator, {.requires_grad = requires_grad}, mean);
}

TEST(BatchNorm, TrainingForwardMatchesReference) {
  const Tensor x = random({4, 3, 5, 6}, 1, false, 2.0f);
  const Tensor gamma = random({3}, 2);
  const Tensor beta = random({3}, 3);
  const Tensor y = batch_norm2d(x, gamma, beta, Tensor(), Tensor(), {.training = true});
  std::vector<float> mean, var;
  const auto expected =
      testing::reference_batch_norm(4, 3, 30, x.to_vector<float>(), gamma.to_vector<float>(),
                                    beta.to_vector<float>(), 1e-5f, mean, var);
  const auto actual = y.to_vector<float>();
  for (size_t i = 0; i < actual.size(); ++i) ASSERT_NEAR(actual[i], expected[i], 1e-4f) << i;
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
  EXPECT_THROW(batch_norm2d(zeros({2, 3, 4}), Tensor(), Tensor(), Tensor(), Tensor()), Error);
  EXPECT_THROW(batch_norm2d(x, zeros({4}), Tensor(), Tensor(), Tensor()), Error);
  EXPECT_THROW(batch_norm2d(x, Tensor(), Tensor(), zeros({3}), Tensor()), Error);
  EXPECT_THROW(batch_norm2d(x, Tensor(), Tensor(), Tensor(), Tensor(), {.training = false}), Error);
  try {
    batch_norm2d(zeros({1, 3, 1, 1}), Tensor(), Tensor(), Tensor(), Tensor());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("[batch_norm2d] training needs more than one value per channel"),
        std::string::npos);
  }
}

}  // namespace
}  // namespace tandem
