#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/autograd/node.h"
#include "engine/tandem.h"
#include "tests/support/gradcheck.h"

namespace tandem {
namespace {

using testing::check_gradients;
using Inputs = std::vector<Tensor>;

Tensor param(const Shape& shape, uint64_t seed, float low = -1.0f, float high = 1.0f) {
  Generator generator(seed);
  return uniform(shape, low, high, generator).set_requires_grad(true);
}

TEST(Elementwise, BroadcastsPerChannel) {
  // (N, C, H, W) + (C, 1, 1): the per-channel case batch-norm and biases need.
  const Tensor x = zeros({2, 3, 2, 2});
  const Tensor bias = from_vector<float>({1, 2, 3}, {3, 1, 1});
  const std::vector<float> out = add(x, bias).to_vector<float>();
  ASSERT_EQ(out.size(), 24u);
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(out[i], static_cast<float>(1 + (i / 4) % 3)) << i;
}

TEST(Elementwise, BroadcastsRowAndColumn) {
  const Tensor column = from_vector<float>({1, 2}, {2, 1});
  const Tensor row = from_vector<float>({10, 20, 30}, {3});
  EXPECT_EQ(mul(column, row).to_vector<float>(), (std::vector<float>{10, 20, 30, 20, 40, 60}));
  EXPECT_EQ(sub(row, column).shape(), (Shape{2, 3}));
  EXPECT_EQ(div(row, column).to_vector<float>(), (std::vector<float>{10, 20, 30, 5, 10, 15}));
}

TEST(Elementwise, UnaryValues) {
  const Tensor x = from_vector<float>({-1.0f, 0.5f, 4.0f}, {3});
  EXPECT_EQ(relu(x).to_vector<float>(), (std::vector<float>{0, 0.5f, 4}));
  EXPECT_EQ(neg(x).to_vector<float>(), (std::vector<float>{1, -0.5f, -4}));
  EXPECT_EQ((x + 1.0f).to_vector<float>(), (std::vector<float>{0, 1.5f, 5}));
  EXPECT_EQ((x * 2.0f).to_vector<float>(), (std::vector<float>{-2, 1, 8}));
  EXPECT_FLOAT_EQ(sqrt(x).to_vector<float>()[2], 2.0f);
  EXPECT_FLOAT_EQ(exp(x).to_vector<float>()[0], std::exp(-1.0f));
  EXPECT_FLOAT_EQ(log(x).to_vector<float>()[2], std::log(4.0f));
  EXPECT_FLOAT_EQ(pow(x, 3.0f).to_vector<float>()[1], 0.125f);
}

TEST(Elementwise, EqualComparesFloatsAndLabels) {
  const Tensor a = from_vector<int64_t>({1, 2, 3}, {3}, {.dtype = DType::Int64});
  const Tensor b = from_vector<int64_t>({1, 0, 3}, {3}, {.dtype = DType::Int64});
  EXPECT_EQ(equal(a, b).to_vector<float>(), (std::vector<float>{1, 0, 1}));
  EXPECT_THROW(equal(a, zeros({3})), Error);
}

TEST(Elementwise, InPlaceAddIsNotRecorded) {
  Tensor acc = zeros({2});
  const Tensor x = from_vector<float>({1, 2}, {2}, {.requires_grad = true});
  add_(acc, x);
  add_(acc, x);
  EXPECT_EQ(acc.to_vector<float>(), (std::vector<float>{2, 4}));
  EXPECT_FALSE(acc.requires_grad());
}

TEST(Elementwise, InPlaceScalarAddCountsInInt64) {
  Tensor counter = zeros({}, {.dtype = DType::Int64});
  add_(counter, 1.0);
  add_(counter, 1.0);
  EXPECT_EQ(counter.to_vector<int64_t>(), (std::vector<int64_t>{2}));
  Tensor large = full({2}, 1e12, {.dtype = DType::Int64});  // past float32's whole numbers
  add_(large, 3.0);
  EXPECT_EQ(large.to_vector<int64_t>(), (std::vector<int64_t>{1000000000003, 1000000000003}));
  Tensor floats = from_vector<float>({1.5f, -2.0f}, {2});
  add_(floats, 0.25);
  EXPECT_EQ(floats.to_vector<float>(), (std::vector<float>{1.75f, -1.75f}));
  EXPECT_THROW(add_(counter, 0.5), Error);  // int64 takes whole numbers
  Tensor bytes = zeros({1}, {.dtype = DType::UInt8});
  EXPECT_THROW(add_(bytes, 1.0), Error);
}

// Note [NaN through ReLU and max pooling]: the values PyTorch 1.13 gives on the CPU, in float32
// and bfloat16 (whose NaN and -0 are exact).
TEST(Elementwise, ReluAndAddReluPassNaNThroughLikePyTorch) {
  const float nan = std::nanf("");
  for (const DType dtype : {DType::Float32, DType::BFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    // torch.relu([-0., nan, -1, 2]) = [-0., nan, 0, 2]; backward of ones: [0, 1, 0, 1].
    const Tensor x =
        from_vector<float>({-0.0f, nan, -1.0f, 2.0f}, {4}).to(dtype).set_requires_grad(true);
    const Tensor y = relu(x);
    const std::vector<float> out = y.to(DType::Float32).to_vector<float>();
    EXPECT_TRUE(std::signbit(out[0]) && out[0] == 0.0f) << out[0];
    EXPECT_TRUE(std::isnan(out[1]));
    EXPECT_EQ(out[2], 0.0f);
    EXPECT_EQ(out[3], 2.0f);
    y.backward(ones({4}, {.dtype = dtype}));
    EXPECT_EQ(x.grad().to(DType::Float32).to_vector<float>(), (std::vector<float>{0, 1, 0, 1}));
    // A NaN gradient stops where the output is not positive: torch gives [0, nan].
    const Tensor z = from_vector<float>({-1.0f, 1.0f}, {2}).to(dtype).set_requires_grad(true);
    relu(z).backward(full({2}, nan, {.dtype = dtype}));
    const std::vector<float> through = z.grad().to(DType::Float32).to_vector<float>();
    EXPECT_EQ(through[0], 0.0f);
    EXPECT_TRUE(std::isnan(through[1]));
    // torch.relu(a + b) = [nan, nan, inf, 0]; backward of ones: [1, 1, 1, 0] to both.
    const float inf = std::numeric_limits<float>::infinity();
    const Tensor a =
        from_vector<float>({nan, -1.0f, 1.0f, 1.0f}, {4}).to(dtype).set_requires_grad(true);
    const Tensor b =
        from_vector<float>({1.0f, nan, inf, -3.0f}, {4}).to(dtype).set_requires_grad(true);
    const Tensor joined = add_relu(a, b);
    const std::vector<float> sums = joined.to(DType::Float32).to_vector<float>();
    EXPECT_TRUE(std::isnan(sums[0]) && std::isnan(sums[1])) << sums[0] << " " << sums[1];
    EXPECT_EQ(sums[2], inf);
    EXPECT_EQ(sums[3], 0.0f);
    joined.backward(ones({4}, {.dtype = dtype}));
    EXPECT_EQ(a.grad().to(DType::Float32).to_vector<float>(), (std::vector<float>{1, 1, 1, 0}));
    EXPECT_EQ(b.grad().to(DType::Float32).to_vector<float>(), (std::vector<float>{1, 1, 1, 0}));
  }
}

TEST(ElementwiseGrad, AddSubWithBroadcast) {
  const Tensor a = param({2, 3, 2}, 1);
  const Tensor b = param({3, 1}, 2);
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return add(in[0], in[1]); }, {a, b}));
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return sub(in[0], in[1]); }, {a, b}));
}

TEST(ElementwiseGrad, MulDivWithBroadcast) {
  const Tensor a = param({2, 3}, 3);
  const Tensor b = param({3}, 4, 0.5f, 2.0f);  // away from 0 for div
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return mul(in[0], in[1]); }, {a, b}));
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return div(in[0], in[1]); }, {a, b}));
}

TEST(ElementwiseGrad, ScalarOps) {
  const Tensor a = param({4, 3}, 5);
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return in[0] * 3.0f + 2.0f; }, {a}));
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return -in[0]; }, {a}));
}

TEST(ElementwiseGrad, Relu) {
  // Values at least 0.1 from the kink so that ±eps never crosses it.
  Tensor a =
      from_vector<float>({-0.9f, -0.3f, 0.2f, 0.7f, -0.5f, 1.1f}, {2, 3}, {.requires_grad = true});
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return relu(in[0]); }, {a}));
}

TEST(ElementwiseGrad, ExpLogSqrtPow) {
  const Tensor positive = param({3, 4}, 6, 0.5f, 2.0f);
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return exp(in[0]); }, {positive}));
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return log(in[0]); }, {positive}));
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return sqrt(in[0]); }, {positive}));
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return pow(in[0], 2.5f); }, {positive}));
}

TEST(ElementwiseGrad, Expand) {
  const Tensor a = param({3, 1}, 7);
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return expand(in[0], {2, 3, 4}); }, {a}));
}

TEST(ElementwiseGrad, CheckerCatchesAWrongBackward) {
  // A deliberately wrong backward (gradient doubled) must be reported.
  const Tensor a = param({3}, 8);
  const auto wrong = [](const Inputs& in) {
    Tensor broken = in[0].detach() * 1.0f;
    autograd::record("broken", {&in[0]}, {&broken},
                     [](const std::vector<Tensor>& g, const std::vector<bool>&) {
                       return std::vector<Tensor>{g[0] * 2.0f};
                     });
    return broken;
  };
  EXPECT_FALSE(check_gradients(wrong, {a}));
}

}  // namespace
}  // namespace tandem
