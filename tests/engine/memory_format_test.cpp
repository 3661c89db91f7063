// Channels-last (Note [Memory formats]): the tensor API, every op's channels-last result
// against its NCHW result, gradient checks on channels-last inputs, and format propagation.
//
// Equality is bit for bit where both formats do the same arithmetic in the same order
// (elementwise, pooling, copies); convolution and batch norm run different kernels per format
// (oneDNN's blocked convolution vs its nhwc one; oneDNN's NCHW batch norm vs Tandem's own
// channels-last one), so they are compared within 1e-5 of the largest magnitude, float32
// summation order being the only difference.

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "engine/tandem.h"
#include "tests/support/gradcheck.h"
#include "tests/support/tensor_compare.h"

namespace tandem {
namespace {

using testing::check_gradients;
using testing::expect_close_to_reference;
constexpr MemoryFormat kNchw = MemoryFormat::Contiguous;
constexpr MemoryFormat kNhwc = MemoryFormat::ChannelsLast;

Tensor random(const Shape& shape, uint64_t seed, float mean = 0.0f) {
  Generator generator(seed);
  return randn(shape, generator, {}, mean);
}

TEST(MemoryFormat, StridesAndQueries) {
  const Tensor x = empty({2, 3, 4, 5}, {.memory_format = kNhwc});
  EXPECT_EQ(x.strides(), (Shape{60, 1, 15, 3}));
  EXPECT_TRUE(x.is_contiguous(kNhwc));
  EXPECT_FALSE(x.is_contiguous());
  EXPECT_TRUE(x.is_dense());
  EXPECT_EQ(x.memory_format(), kNhwc);
  EXPECT_EQ(empty({2, 3, 4, 5}).memory_format(), kNchw);
  // One channel, or one pixel: both formats lie the same in memory, so it reads as plain.
  EXPECT_EQ(empty({2, 1, 4, 5}, {.memory_format = kNhwc}).memory_format(), kNchw);
  EXPECT_EQ(empty({2, 3, 1, 1}, {.memory_format = kNhwc}).memory_format(), kNchw);
  EXPECT_TRUE(empty({2, 3, 1, 1}, {.memory_format = kNhwc}).is_contiguous());
}

TEST(MemoryFormat, ChannelsLastNeedsFourDims) {
  EXPECT_THROW(empty({2, 3, 4}, {.memory_format = kNhwc}), Error);
  EXPECT_FALSE(empty({2, 3, 4}).is_contiguous(kNhwc));
}

TEST(MemoryFormat, ConversionKeepsValuesAndOrdersMemory) {
  const Tensor x = from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7}, {1, 2, 2, 2});
  const Tensor y = x.contiguous(kNhwc);
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());  // logical order
  const float* memory = y.data<float>();
  EXPECT_EQ(std::vector<float>(memory, memory + 8), (std::vector<float>{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_TRUE(y.contiguous(kNhwc).is_same(y));  // already there: no copy
  EXPECT_EQ(y.contiguous().to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(y.clone().memory_format(), kNhwc);
  EXPECT_EQ(empty_like(y).memory_format(), kNhwc);
  EXPECT_EQ(y.slice(0, 1).memory_format(), kNhwc);
}

TEST(MemoryFormat, CopyFillAndInPlaceAddIntoChannelsLast) {
  const Tensor x = random({2, 3, 4, 5}, 1);
  Tensor target = empty(x.shape(), {.memory_format = kNhwc});
  target.copy_(x);
  EXPECT_EQ(target.to_vector<float>(), x.to_vector<float>());
  add_(target, x);
  EXPECT_EQ(target.to_vector<float>(), mul(x, 2.0f).to_vector<float>());
  target.fill_(3.0);
  EXPECT_EQ(target.to_vector<float>(), std::vector<float>(120, 3.0f));
}

TEST(MemoryFormat, ConversionIsDifferentiable) {
  const Tensor x = random({2, 3, 4, 5}, 2).set_requires_grad(true);
  EXPECT_TRUE(check_gradients([](const auto& in) { return in[0].contiguous(kNhwc); }, {x}));
}

// An op run on NCHW inputs and on the same values channels-last.
struct FormatCase {
  std::string name;
  std::vector<Shape> shapes;
  std::function<Tensor(const std::vector<Tensor>&)> op;
  double tolerance;  // 0: bit for bit
};

void PrintTo(const FormatCase& c, std::ostream* out) {
  *out << c.name;
}

class OpsKeepChannelsLast : public ::testing::TestWithParam<FormatCase> {};

// Forward and backward in both formats: channels-last results stay channels-last and equal the
// NCHW ones; the gradients come back in each input's format.
TEST_P(OpsKeepChannelsLast, SameValuesSameFormat) {
  const FormatCase& c = GetParam();
  std::vector<Tensor> plain, last;
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    const Tensor values = random(c.shapes[i], 10 + i, i == 0 ? 1.0f : 0.0f);
    plain.push_back(values.clone().set_requires_grad(true));
    Tensor converted = c.shapes[i].size() == 4 ? values.contiguous(kNhwc) : values.clone();
    last.push_back(converted.set_requires_grad(true));
  }
  const Tensor y_plain = c.op(plain);
  const Tensor y_last = c.op(last);
  EXPECT_EQ(y_last.memory_format(),
            y_last.dim() == 4 && y_last.size(2) * y_last.size(3) > 1 ? kNhwc : kNchw);
  const Tensor direction = random(y_plain.shape(), 99);
  sum(mul(y_plain, direction)).backward();
  sum(mul(y_last, direction)).backward();
  const auto compare = [&](const Tensor& actual, const Tensor& expected, const std::string& what) {
    if (c.tolerance == 0) {
      EXPECT_EQ(actual.to_vector<float>(), expected.to_vector<float>()) << what;
    } else {
      expect_close_to_reference(actual, expected, what, c.tolerance);
    }
  };
  compare(y_last, y_plain, c.name + " output");
  for (size_t i = 0; i < plain.size(); ++i) {
    const std::string what = c.name + " gradient of input " + std::to_string(i);
    ASSERT_TRUE(last[i].grad().defined()) << what;
    EXPECT_EQ(last[i].grad().memory_format(), last[i].memory_format()) << what;
    compare(last[i].grad(), plain[i].grad(), what);
  }
}

const BatchNormOptions kTraining{.training = true};

INSTANTIATE_TEST_SUITE_P(
    Ops, OpsKeepChannelsLast,
    ::testing::Values(
        FormatCase{"relu", {{2, 5, 4, 3}}, [](const auto& in) { return relu(in[0]); }, 0},
        FormatCase{"add",
                   {{2, 5, 4, 3}, {2, 5, 4, 3}},
                   [](const auto& in) { return add(in[0], in[1]); },
                   0},
        FormatCase{"mul_broadcast_per_channel",
                   {{2, 5, 4, 3}, {5, 1, 1}},
                   [](const auto& in) { return mul(in[0], in[1]); },
                   0},
        FormatCase{"max_pool2d",
                   {{2, 5, 6, 6}},
                   [](const auto& in) {
                     return max_pool2d(in[0], {.kernel_size = 3, .stride = 2, .padding = 1});
                   },
                   0},
        FormatCase{"adaptive_avg_pool2d_global",
                   {{2, 5, 4, 4}},
                   [](const auto& in) { return adaptive_avg_pool2d(in[0], 1, 1); },
                   0},
        FormatCase{"adaptive_avg_pool2d_overlapping_bins",
                   {{2, 5, 5, 7}},
                   [](const auto& in) { return adaptive_avg_pool2d(in[0], 3, 2); },
                   0},
        FormatCase{"conv2d_3x3",
                   {{2, 16, 8, 8}, {8, 16, 3, 3}},
                   [](const auto& in) { return conv2d(in[0], in[1], Tensor(), {.padding = 1}); },
                   1e-5},
        FormatCase{
            "conv2d_stride2_bias",
            {{2, 8, 9, 9}, {16, 8, 3, 3}, {16}},
            [](const auto& in) { return conv2d(in[0], in[1], in[2], {.stride = 2, .padding = 1}); },
            1e-5},
        FormatCase{"conv2d_1x1_stride2",
                   {{2, 16, 8, 8}, {32, 16, 1, 1}},
                   [](const auto& in) { return conv2d(in[0], in[1], Tensor(), {.stride = 2}); },
                   1e-5},
        FormatCase{"batch_norm2d_training",
                   {{4, 16, 5, 5}, {16}, {16}},
                   [](const auto& in) {
                     return batch_norm2d(in[0], in[1], in[2], Tensor(), Tensor(), kTraining);
                   },
                   1e-5},
        FormatCase{"batch_norm2d_relu_training",
                   {{4, 16, 5, 5}, {16}, {16}},
                   [](const auto& in) {
                     return batch_norm2d(in[0], in[1], in[2], Tensor(), Tensor(),
                                         {.training = true, .fuse_relu = true});
                   },
                   1e-5},
        FormatCase{"add_relu",
                   {{2, 5, 4, 3}, {2, 5, 4, 3}},
                   [](const auto& in) { return add_relu(in[0], in[1]); },
                   0},
        FormatCase{"batch_norm2d_inference",
                   {{4, 16, 5, 5}, {16}, {16}},
                   [](const auto& in) {
                     const Tensor mean = full({16}, 0.5), var = full({16}, 2.0);
                     return batch_norm2d(in[0], in[1], in[2], mean, var, {.training = false});
                   },
                   1e-5}),
    [](const ::testing::TestParamInfo<FormatCase>& info) { return info.param.name; });

TEST(MemoryFormat, ConvolutionOfAPlainInputWithAChannelsLastWeightIsChannelsLast) {
  // PyTorch's rule: the input's or the weight's format.
  const Tensor x = random({2, 4, 6, 6}, 3);
  const Tensor w = random({8, 4, 3, 3}, 4).contiguous(kNhwc);
  EXPECT_EQ(conv2d(x, w, Tensor(), {.padding = 1}).memory_format(), kNhwc);
}

TEST(MemoryFormat, GradientChecksOnChannelsLastInputs) {
  const Tensor x = random({2, 3, 5, 5}, 5).contiguous(kNhwc).set_requires_grad(true);
  const Tensor w = random({4, 3, 3, 3}, 6).contiguous(kNhwc).set_requires_grad(true);
  const Tensor gamma = random({3}, 7, 1.0f).set_requires_grad(true);
  const Tensor beta = random({3}, 8).set_requires_grad(true);
  EXPECT_TRUE(check_gradients(
      [](const auto& in) { return conv2d(in[0], in[1], Tensor(), {.padding = 1}); }, {x, w}));
  EXPECT_TRUE(check_gradients(
      [](const auto& in) {
        return batch_norm2d(in[0], in[1], in[2], Tensor(), Tensor(), kTraining);
      },
      {x, gamma, beta}));
  EXPECT_TRUE(check_gradients(
      [](const auto& in) { return max_pool2d(in[0], {.kernel_size = 2, .stride = 2}); }, {x}));
  EXPECT_TRUE(
      check_gradients([](const auto& in) { return adaptive_avg_pool2d(in[0], 2, 2); }, {x}));
}

// Runs fn on fresh leaves holding `values`; returns the output and the inputs' gradients of
// sum(output * direction).
std::vector<Tensor> output_and_gradients(
    const std::function<Tensor(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& values) {
  std::vector<Tensor> leaves;
  for (const Tensor& v : values) leaves.push_back(v.clone().set_requires_grad(true));
  const Tensor out = fn(leaves);
  sum(mul(out, random(out.shape(), 77))).backward();
  std::vector<Tensor> result{out};
  for (const Tensor& leaf : leaves) result.push_back(leaf.grad());
  return result;
}

// A fused op and the two ops it replaces give the same output and gradients: bit for bit for
// add_relu (same arithmetic); within float32 rounding for batch norm, whose fused backward folds
// the ReLU's mask into its sums. (Each op's own gradients are checked against finite
// differences elsewhere; the kink of the ReLU makes a direct finite-difference check flaky.)
TEST(MemoryFormat, FusedBatchNormReluEqualsTheTwoOps) {
  const std::vector<Tensor> values = {random({4, 8, 5, 5}, 11).contiguous(kNhwc),
                                      random({8}, 12, 1.0f), random({8}, 13)};
  const auto fused = output_and_gradients(
      [](const auto& in) {
        return batch_norm2d(in[0], in[1], in[2], Tensor(), Tensor(),
                            {.training = true, .fuse_relu = true});
      },
      values);
  const auto composed = output_and_gradients(
      [](const auto& in) {
        return relu(batch_norm2d(in[0], in[1], in[2], Tensor(), Tensor(), kTraining));
      },
      values);
  EXPECT_EQ(fused[0].to_vector<float>(), composed[0].to_vector<float>());
  EXPECT_EQ(fused[1].memory_format(), kNhwc);
  for (size_t i = 1; i < fused.size(); ++i) {
    expect_close_to_reference(fused[i], composed[i], "gradient " + std::to_string(i), 1e-5);
  }
}

TEST(MemoryFormat, AddReluEqualsTheTwoOps) {
  for (const Shape& b_shape : {Shape{3, 4, 5, 2}, Shape{2}}) {  // same shape, broadcast
    const std::vector<Tensor> values = {random({3, 4, 5, 2}, 14), random(b_shape, 15)};
    const auto fused =
        output_and_gradients([](const auto& in) { return add_relu(in[0], in[1]); }, values);
    const auto composed =
        output_and_gradients([](const auto& in) { return relu(add(in[0], in[1])); }, values);
    for (size_t i = 0; i < fused.size(); ++i) {
      EXPECT_EQ(fused[i].to_vector<float>(), composed[i].to_vector<float>()) << i;
    }
  }
}

TEST(MemoryFormat, BatchNormStatisticsOfLargeMeanData) {
  // Two-pass variance (Note [Channels-last batch norm]): a mean of 1000 must not cost accuracy.
  const Tensor x = random({8, 16, 6, 6}, 9, 1000.0f);
  const Tensor gamma = ones({16}), beta = zeros({16});
  const Tensor y_plain = batch_norm2d(x, gamma, beta, Tensor(), Tensor(), kTraining);
  const Tensor y_last =
      batch_norm2d(x.contiguous(kNhwc), gamma, beta, Tensor(), Tensor(), kTraining);
  expect_close_to_reference(y_last, y_plain, "normalised values", 1e-3);
}

}  // namespace
}  // namespace tandem
