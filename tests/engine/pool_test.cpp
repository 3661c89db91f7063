#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
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

// Both layouts: the CPU backend pools channels-last tensors as they are.
TEST_P(MaxPoolAgainstReference, ForwardAndBackward) {
  const PoolCase p = GetParam();
  for (const MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
    SCOPED_TRACE(memory_format_name(format));
    const Tensor values = distinct_values({p.n, p.c, p.h, p.w}, 1, false);
    const Tensor x = values.contiguous(format).set_requires_grad(true);
    const Tensor y =
        max_pool2d(x, {.kernel_size = p.kernel, .stride = p.stride, .padding = p.padding});
    Generator generator(2);
    const Tensor grad_y = randn(y.shape(), generator);
    sum(mul(y, grad_y)).backward();
    std::vector<float> expected_grad;
    const auto expected = testing::reference_max_pool2d(p.n, p.c, p.h, p.w, p.kernel, p.stride,
                                                        p.padding, values.to_vector<float>(),
                                                        grad_y.to_vector<float>(), expected_grad);
    EXPECT_EQ(y.contiguous().to_vector<float>(), expected);
    const auto grad = x.grad().contiguous().to_vector<float>();
    ASSERT_EQ(grad.size(), expected_grad.size());
    for (size_t i = 0; i < grad.size(); ++i) EXPECT_NEAR(grad[i], expected_grad[i], 1e-5f) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MaxPoolAgainstReference,
                         ::testing::Values(PoolCase{2, 3, 8, 8, 2, 2, 0},  // the classic 2x2
                                           PoolCase{1, 2, 7, 9, 3, 2, 1},  // ImageNet-stem style
                                           PoolCase{2, 1, 5, 5, 2, 2, 0},  // odd input, floor size
                                           PoolCase{1, 2, 6, 6, 3, 1, 1},  // overlapping windows
                                           PoolCase{3, 4, 8, 8, 3, 2, 1}));  // batch 3, 3x3/2

// Ties in a window: the first maximum in row-major order takes the gradient, in both layouts
// and dtypes (as PyTorch and the CUDA kernel do).
TEST(MaxPool, TheFirstMaximumOfAWindowWins) {
  for (const DType dtype : {DType::Float32, DType::BFloat16}) {
    for (const MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
      // Channel 0: a tie of 5s at (0, 1) and (1, 0); channel 1: all equal.
      const Tensor x = from_vector<float>({1, 5, 5, 2, 3, 3, 3, 3}, {1, 2, 2, 2})
                           .to(dtype)
                           .contiguous(format)
                           .set_requires_grad(true);
      const Tensor y = max_pool2d(x, {.kernel_size = 2, .stride = 2});
      y.backward(ones(y.shape(), {.dtype = dtype}));
      EXPECT_EQ(y.to(DType::Float32).contiguous().to_vector<float>(), (std::vector<float>{5, 3}));
      EXPECT_EQ(x.grad().to(DType::Float32).contiguous().to_vector<float>(),
                (std::vector<float>{0, 1, 0, 0, 1, 0, 0, 0}))
          << dtype_name(dtype) << " " << memory_format_name(format);
    }
  }
}

// Note [NaN through ReLU and max pooling]: a NaN wins its window and takes the window's
// gradient; of two, the last one (PyTorch 1.13 gives index 2 for [[1, nan], [nan, 2]]).
TEST(MaxPool, ANaNWinsItsWindowLikePyTorch) {
  const float nan = std::nanf("");
  for (const DType dtype : {DType::Float32, DType::BFloat16}) {
    for (const MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + memory_format_name(format));
      // Channels: a NaN first, a NaN last, two NaNs, none; 16 channels so that channels-last
      // runs whole vectors.
      std::vector<float> values;
      for (int64_t c = 0; c < 16; ++c) {
        std::vector<float> window = {1, 2, 3, 4};
        if (c % 4 == 0) window[0] = nan;
        if (c % 4 == 1) window[3] = nan;
        if (c % 4 == 2) window[1] = window[2] = nan;
        values.insert(values.end(), window.begin(), window.end());
      }
      const Tensor x =
          from_vector(values, {1, 16, 2, 2}).to(dtype).contiguous(format).set_requires_grad(true);
      const Tensor y = max_pool2d(x, {.kernel_size = 2, .stride = 2});
      y.backward(ones(y.shape(), {.dtype = dtype}));
      const std::vector<float> out = y.to(DType::Float32).contiguous().to_vector<float>();
      const std::vector<float> grad = x.grad().to(DType::Float32).contiguous().to_vector<float>();
      for (int64_t c = 0; c < 16; ++c) {
        const int winner = std::array<int, 4>{0, 3, 2, 3}[c % 4];
        EXPECT_EQ(std::isnan(out[c]), c % 4 != 3) << "channel " << c << ": " << out[c];
        for (int k = 0; k < 4; ++k) {
          EXPECT_EQ(grad[c * 4 + k], k == winner ? 1.0f : 0.0f) << "channel " << c << ", " << k;
        }
      }
    }
  }
}

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
