#include <gtest/gtest.h>

#include <cmath>

#include "engine/tandem.h"
#include "tests/support/gradcheck.h"

namespace tandem {
namespace {

using testing::check_gradients;
using Inputs = std::vector<Tensor>;

Tensor param(const Shape& shape, uint64_t seed) {
  Generator generator(seed);
  return randn(shape, generator).set_requires_grad(true);
}

Tensor labels(const std::vector<int64_t>& values) {
  return from_vector(values, {static_cast<int64_t>(values.size())}, {.dtype = DType::Int64});
}

TEST(Matmul, MatchesHandComputedProduct) {
  const Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = from_vector<float>({1, 0, 0, 1, 1, 1}, {3, 2});
  EXPECT_EQ(matmul(a, b).to_vector<float>(), (std::vector<float>{4, 5, 10, 11}));
}

TEST(Matmul, LinearIsInputTimesWeightTransposedPlusBias) {
  const Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor w = from_vector<float>({1, 0, -1, 2, 2, 2}, {2, 3});
  const Tensor b = from_vector<float>({10, 20}, {2});
  EXPECT_EQ(linear(x, w, b).to_vector<float>(), (std::vector<float>{8, 32, 8, 50}));
  EXPECT_EQ(linear(x, w).to_vector<float>(), (std::vector<float>{-2, 12, -2, 30}));
}

TEST(MatmulGrad, MatmulAndLinear) {
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return matmul(in[0], in[1]); },
                              {param({3, 4}, 1), param({4, 5}, 2)}));
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return linear(in[0], in[1], in[2]); },
                              {param({6, 4}, 3), param({3, 4}, 4), param({3}, 5)}));
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return linear(in[0], in[1]); },
                              {param({2, 5}, 6), param({4, 5}, 7)}));
}

TEST(Loss, LogSoftmaxRowsNormalise) {
  const Tensor x = from_vector<float>({1, 2, 3, 1000, 1000, 1000}, {2, 3});
  const std::vector<float> y = log_softmax(x).to_vector<float>();
  for (int row = 0; row < 2; ++row) {
    double total = 0.0;
    for (int j = 0; j < 3; ++j) total += std::exp(y[row * 3 + j]);
    EXPECT_NEAR(total, 1.0, 1e-6);
  }
  EXPECT_NEAR(y[3], -std::log(3.0), 1e-6);  // no overflow for large logits
}

TEST(Loss, CrossEntropyMatchesTheDefinition) {
  const Tensor logits = from_vector<float>({2, 1, 0.1f, 0.5f, 2.5f, 0.3f}, {2, 3});
  const Tensor target = labels({0, 2});
  const std::vector<float> lp = log_softmax(logits).to_vector<float>();
  const double expected = -(lp[0] + lp[5]) / 2.0;
  EXPECT_NEAR(cross_entropy(logits, target).item(), expected, 1e-6);
}

TEST(Loss, CountCorrect) {
  const Tensor logits = from_vector<float>({2, 1, 0, 0, 1, 2, 5, 0, 0}, {3, 3});
  EXPECT_DOUBLE_EQ(count_correct(logits, labels({0, 2, 1})).item(), 2.0);
}

TEST(Loss, BadLabelsAreClearErrors) {
  const Tensor logits = zeros({2, 10});
  try {
    cross_entropy(logits, labels({3, 10}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[cross_entropy] label 10 at row 1 is outside [0, 10)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(cross_entropy(logits, labels({1})), Error);
  EXPECT_THROW(cross_entropy(logits, zeros({2})), Error);
}

TEST(LossGrad, LogSoftmaxAndCrossEntropy) {
  EXPECT_TRUE(
      check_gradients([](const Inputs& in) { return log_softmax(in[0]); }, {param({4, 5}, 8)}));
  const Tensor target = labels({1, 0, 4, 2});
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return cross_entropy(in[0], in[1]); },
                              {param({4, 5}, 9), target}));
}

}  // namespace
}  // namespace tandem
