#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/tandem.h"
#include "tests/support/error_message.h"
#include "tests/support/gradcheck.h"
#include "tests/support/reference_ops.h"

namespace tandem {
namespace {

using testing::error_message;

using testing::check_gradients;
using Inputs = std::vector<Tensor>;

// Distinct values 0.1 apart in shuffled order: no ties, and ±eps never changes a window's argmax.
Tensor distinct_values(const Shape& shape, uint64_t seed, bool requires_grad) {
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)));
  std::iota(values.begin(), values.end(), 0.0f);
  std::shuffle(values.begin(), values.end(), std::mt19937_64(seed));
  for (float& v : values) v *= 0.1f;
  return from_vector(values, shape, {.requires_grad = requires_grad});
}

struct PoolCase {
  int64_t n, c, h, w, kernel, stride, padding;
};
void PrintTo(const PoolCase& p, std::ostream* out) {
  *out << "x [" << p.n << ", " << p.c << ", " << p.h << ", " << p.w << "] kernel " << p.kernel
       << " stride " << p.stride << " padding " << p.padding;
}

class MaxPoolAgainstReference : public ::testing::TestWithParam<PoolCase> {};

TEST_P(MaxPoolAgainstReference, ForwardAndBackward) {
  const PoolCase p = GetParam();
  const Tensor x = distinct_values({p.n, p.c, p.h, p.w}, 1, true);
  const Tensor y =
      max_pool2d(x, {.kernel_size = p.kernel, .stride = p.stride, .padding = p.padding});
  Generator generator(2);
  const Tensor grad_y = randn(y.shape(), generator);
  sum(mul(y, grad_y)).backward();
  std::vector<float> expected_grad;
  const auto expected =
      testing::reference_max_pool2d(p.n, p.c, p.h, p.w, p.kernel, p.stride, p.padding,
                                    x.to_vector<float>(), grad_y.to_vector<float>(), expected_grad);
  EXPECT_EQ(y.to_vector<float>(), expected);
  const auto grad = x.grad().to_vector<float>();
  ASSERT_EQ(grad.size(), expected_grad.size());
  for (size_t i = 0; i < grad.size(); ++i) EXPECT_NEAR(grad[i], expected_grad[i], 1e-5f) << i;
}

INSTANTIATE_TEST_SUITE_P(Shapes, MaxPoolAgainstReference,
                         ::testing::Values(PoolCase{2, 3, 8, 8, 2, 2, 0},  // the classic 2x2
                                           PoolCase{1, 2, 7, 9, 3, 2, 1},  // ImageNet-stem style
                                           PoolCase{2, 1, 5, 5, 2, 2, 0},  // odd input, floor size
                                           PoolCase{1, 2, 6, 6, 3, 1, 1},  // overlapping windows
                                           PoolCase{3, 4, 8, 8, 3, 2, 1}));  // batch 3, 3x3/2

TEST(MaxPoolGrad, FiniteDifferences) {
  const Tensor x = distinct_values({1, 2, 5, 6}, 3, true);
  EXPECT_TRUE(check_gradients(
      [](const Inputs& in) {
        return max_pool2d(in[0], {.kernel_size = 3, .stride = 2, .padding = 1});
      },
      {x}));
}

TEST(AdaptiveAvgPool, MatchesReferenceIncludingUnevenBins) {
  for (const auto& [h, w, oh, ow] :
       std::vector<std::array<int64_t, 4>>{{8, 8, 1, 1}, {7, 5, 3, 2}, {4, 4, 4, 4}}) {
    const Tensor x = distinct_values({2, 3, h, w}, 4, false);
    const auto expected =
        testing::reference_adaptive_avg_pool2d(2, 3, h, w, oh, ow, x.to_vector<float>());
    const auto actual = adaptive_avg_pool2d(x, oh, ow).to_vector<float>();
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < actual.size(); ++i)
      EXPECT_NEAR(actual[i], expected[i], 1e-5f) << h << "x" << w;
  }
}

TEST(AdaptiveAvgPoolGrad, FiniteDifferences) {
  Generator generator(5);
  const Tensor x = randn({2, 2, 5, 7}, generator, {.requires_grad = true});
  EXPECT_TRUE(
      check_gradients([](const Inputs& in) { return adaptive_avg_pool2d(in[0], 1, 1); }, {x}));
  EXPECT_TRUE(
      check_gradients([](const Inputs& in) { return adaptive_avg_pool2d(in[0], 3, 2); }, {x}));
}

TEST(Pool, BadArgumentsAreClearErrors) {
  const Tensor x = zeros({1, 1, 4, 4});
  const Tensor int64_x = zeros({1, 1, 4, 4}, {.dtype = DType::Int64});
  const std::vector<std::pair<std::string, std::function<void()>>> cases = {
      {"[max_pool2d] input has 3 dims",
       [&] {
         max_pool2d(zeros({1, 1, 4}), {});
       }},
      {"[max_pool2d] input is int64", [&] { max_pool2d(int64_x, {}); }},
      {"[max_pool2d] kernel 3 is larger than the padded input",
       [&] {
         max_pool2d(zeros({1, 1, 2, 2}), {.kernel_size = 3, .stride = 1});
       }},
      {"[max_pool2d] needs kernel_size >= 1, stride >= 1",
       [&] { max_pool2d(x, {.kernel_size = 2, .stride = 0}); }},
      {"[max_pool2d] needs kernel_size >= 1, stride >= 1, padding >= 0",
       [&] { max_pool2d(x, {.kernel_size = 2, .stride = 2, .padding = -1}); }},
      {"[max_pool2d] padding 2 is more than half the kernel size 2",
       [&] { max_pool2d(x, {.kernel_size = 2, .stride = 2, .padding = 2}); }},
      {"[adaptive_avg_pool2d] output size must be positive, got 0x1",
       [&] { adaptive_avg_pool2d(x, 0, 1); }},
      {"[adaptive_avg_pool2d] input has 2 dims",
       [&] {
         adaptive_avg_pool2d(zeros({4, 4}), 1, 1);
       }},
      {"[adaptive_avg_pool2d] input is int64", [&] { adaptive_avg_pool2d(int64_x, 1, 1); }},
  };
  for (const auto& [expected, call] : cases) {
    EXPECT_NE(error_message(call).find(expected), std::string::npos)
        << "expected \"" << expected << "\", got \"" << error_message(call) << "\"";
  }
}

}  // namespace
}  // namespace tandem
