// The layers that compute in bfloat16 under mixed precision (Note [Mixed precision] in
// nn/precision.h): the differentiable cast, conv2d and linear, each against its float32 self
// run on the same bfloat16-rounded values, so the only difference left is what bfloat16
// itself must cost.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/ops/cast.h"
#include "engine/tandem.h"
#include "tests/support/error_message.h"

namespace tandem {
namespace {

using testing::error_message;
using ::testing::HasSubstr;

// Values a bfloat16 holds exactly, so float32 and bfloat16 runs start from the same numbers.
Tensor bf16_exact(const Shape& shape, uint64_t seed,
                  MemoryFormat format = MemoryFormat::Contiguous) {
  Generator generator(seed);
  return randn(shape, generator).to(DType::BFloat16).to(DType::Float32).contiguous(format);
}

std::vector<float> floats(const Tensor& t) {
  return t.detach().to(DType::Float32).to_vector<float>();
}

// A bfloat16 result is its float32 twin rounded once: within half an ulp, at most 2^-8 of its
// size (an ulp is 2^-7 of the power of two below it).
// The float32 sums of the two runs may also differ in order (different kernels): 1e-5 of the
// operands' scale covers that, far below what a wrong rounding or a lost term would move.
void expect_rounded_from(const Tensor& actual, const Tensor& expected, const std::string& what) {
  const std::vector<float> a = floats(actual);
  const std::vector<float> e = floats(expected);
  ASSERT_EQ(a.size(), e.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], e[i], std::ldexp(std::abs(e[i]), -8) + 1e-4f) << what << " at " << i;
  }
}

TEST(CastBf16, RoundsKeepsTheFormatAndCastsTheGradientBack) {
  Generator generator(1);
  const Tensor x = randn({2, 3, 4, 5}, generator, {.requires_grad = true})
                       .detach()
                       .contiguous(MemoryFormat::ChannelsLast)
                       .set_requires_grad(true);
  const Tensor y = cast(x, DType::BFloat16);
  EXPECT_EQ(y.dtype(), DType::BFloat16);
  EXPECT_TRUE(y.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_EQ(floats(y), x.to(DType::BFloat16).to(DType::Float32).to_vector<float>());

  const Tensor grad = bf16_exact(x.shape(), 2).to(DType::BFloat16);
  y.backward(grad);
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::Float32);
  EXPECT_EQ(x.grad().to_vector<float>(), floats(grad));
  EXPECT_EQ(cast(x, DType::Float32).impl(), x.impl()) << "a cast to its own dtype is the tensor";
}

struct ConvCase {
  Shape x, w;
  int64_t stride, padding;
  MemoryFormat format;
};

class Conv2dBf16 : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2dBf16, ForwardAndBackwardAreFloat32RoundedOnce) {
  const ConvCase& c = GetParam();
  const Conv2dOptions options{.stride = c.stride, .padding = c.padding};
  const Tensor x = bf16_exact(c.x, 1, c.format).set_requires_grad(true);
  const Tensor w = bf16_exact(c.w, 2).set_requires_grad(true);
  const Tensor y = conv2d(x, w, Tensor(), options);
  const Tensor grad_y = bf16_exact(y.shape(), 3, c.format);
  y.backward(grad_y);

  const Tensor xb = x.detach().to(DType::BFloat16).contiguous(c.format).set_requires_grad(true);
  const Tensor wb = w.detach().to(DType::BFloat16).set_requires_grad(true);
  const Tensor yb = conv2d(xb, wb, Tensor(), options);
  ASSERT_EQ(yb.dtype(), DType::BFloat16);
  EXPECT_EQ(yb.memory_format(), c.format);
  yb.backward(cast(grad_y, DType::BFloat16));
  ASSERT_EQ(xb.grad().dtype(), DType::BFloat16);
  ASSERT_EQ(wb.grad().dtype(), DType::BFloat16);

  expect_rounded_from(yb, y, "y");
  expect_rounded_from(xb.grad(), x.grad(), "grad x");
  expect_rounded_from(wb.grad(), w.grad(), "grad w");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Conv2dBf16,
    ::testing::Values(ConvCase{{4, 16, 8, 8}, {16, 16, 3, 3}, 1, 1, MemoryFormat::ChannelsLast},
                      ConvCase{{4, 16, 8, 8}, {32, 16, 3, 3}, 2, 1, MemoryFormat::ChannelsLast},
                      ConvCase{{4, 16, 8, 8}, {32, 16, 1, 1}, 2, 0, MemoryFormat::ChannelsLast},
                      ConvCase{{4, 3, 8, 8}, {16, 3, 3, 3}, 1, 1, MemoryFormat::Contiguous},
                      ConvCase{{2, 8, 6, 6}, {8, 8, 3, 3}, 1, 1, MemoryFormat::Contiguous}));

TEST(Conv2dBf16Errors, InputAndWeightMustShareTheDtype) {
  const Tensor x = zeros({1, 2, 4, 4}, {.dtype = DType::BFloat16});
  const Tensor w = zeros({2, 2, 3, 3});
  EXPECT_THAT(error_message([&] { conv2d(x, w, Tensor(), {}); }),
              HasSubstr("[conv2d] weight is float32, expected bfloat16"));
  EXPECT_THAT(error_message([&] {
                conv2d(zeros({1, 2, 4, 4}, {.dtype = DType::Float16}), w, Tensor(), {});
              }),
              HasSubstr("[conv2d] input is float16, expected float32 or bfloat16"));
}

TEST(LinearBf16, GivesFloat32LogitsAndGradientsRoundedOnce) {
  const Tensor x = bf16_exact({8, 64}, 1).set_requires_grad(true);
  const Tensor w = bf16_exact({10, 64}, 2).set_requires_grad(true);
  const Tensor b = bf16_exact({10}, 3).set_requires_grad(true);
  const Tensor grad = bf16_exact({8, 10}, 4);
  const Tensor y = linear(x, w, b);
  y.backward(grad);

  const Tensor xb = x.detach().to(DType::BFloat16).set_requires_grad(true);
  const Tensor wb = w.detach().to(DType::BFloat16).set_requires_grad(true);
  const Tensor bb = b.detach().clone().set_requires_grad(true);
  const Tensor yb = linear(xb, wb, bb);
  ASSERT_EQ(yb.dtype(), DType::Float32) << "the logits go to a float32 loss";
  yb.backward(grad);
  // The product of bfloat16 operands is exact in float32 and summed in float32: only the order
  // of the sums may differ from sgemm's.
  const auto y32 = y.to_vector<float>();
  const auto yb32 = yb.to_vector<float>();
  for (size_t i = 0; i < y32.size(); ++i) ASSERT_NEAR(yb32[i], y32[i], 1e-4f) << i;
  expect_rounded_from(xb.grad(), x.grad(), "grad x");
  expect_rounded_from(wb.grad(), w.grad(), "grad w");
  EXPECT_EQ(bb.grad().to_vector<float>(), b.grad().to_vector<float>());
}

TEST(LinearBf16, TransposedOperandsAndScalingMatchSgemm) {
  // The backend's bfloat16 GEMM with every transpose and alpha/beta, against sgemm.
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      const Tensor a = bf16_exact(ta ? Shape{7, 5} : Shape{5, 7}, 1);
      const Tensor b = bf16_exact(tb ? Shape{3, 7} : Shape{7, 3}, 2);
      Tensor expected = bf16_exact({5, 3}, 3);
      Tensor actual = expected.clone();
      backend_for(Device::cpu()).gemm(ta, tb, 0.5f, a, b, 2.0f, expected);
      backend_for(Device::cpu())
          .gemm(ta, tb, 0.5f, a.to(DType::BFloat16), b.to(DType::BFloat16), 2.0f, actual);
      const auto e = expected.to_vector<float>();
      const auto r = actual.to_vector<float>();
      for (size_t i = 0; i < e.size(); ++i) ASSERT_NEAR(r[i], e[i], 1e-4f) << ta << tb << i;
    }
  }
}

}  // namespace
}  // namespace tandem
