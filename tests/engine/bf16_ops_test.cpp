// The activation ops in bfloat16 (Note [bfloat16 activations] in engine/backend/backend.h) against
// the same ops in float32 on the same values: each input is rounded to bfloat16 once, and the
// float32 run gets those values widened (exactly), so the two runs differ only where the bfloat16
// one rounds what it stores.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/autograd/node.h"
#include "engine/cpu/float_types.h"
#include "engine/tandem.h"
#include "tests/support/error_message.h"

namespace tandem {
namespace {

using testing::contains;
using testing::error_message;

// Tolerance: a bfloat16 kernel computes in float32 what the float32 kernel computes, then rounds
// each stored element once to nearest even. bfloat16 keeps 8 significant bits, so that rounding
// moves a value v by at most half a unit in the last place, 2^-8 * |v|. What is left is float32
// evaluation order (none for most kernels, which run the float32 arithmetic as it is): 1e-5 on
// values of order 1. A truncating conversion (up to 2^-7 * |v|), a rounding done twice over a
// sum, or a dropped term breaks it.
constexpr double kHalfUlp = 1.0 / 256;
constexpr double kFloatSlack = 1e-5;

// Random values, rounded to bfloat16: what both runs see.
Tensor random_values(const Shape& shape, uint64_t seed, MemoryFormat format = {},
                     float mean = 0.0f) {
  Generator generator(seed);
  return randn(shape, generator, {}, mean).to(DType::BFloat16).contiguous(format);
}

// The same values in bfloat16 and in float32, each differentiable, in one memory format. Only
// float32 leaves may require grad (weights stay float32), so the bfloat16 one is made, as mixed
// precision's cast makes its activations, the output of a node: here one that keeps the gradient
// reaching it.
struct Pair {
  Tensor half;
  Tensor full;
  std::shared_ptr<Tensor> half_grad_sink = std::make_shared<Tensor>();
  Tensor half_grad() const { return *half_grad_sink; }
};

Pair twins(const Shape& shape, uint64_t seed, MemoryFormat format = {}, float mean = 0.0f) {
  Pair pair;
  const Tensor values = random_values(shape, seed, format, mean);
  pair.full = values.to(DType::Float32).contiguous(format);
  pair.full.set_requires_grad(true);
  Tensor anchor = zeros({1});
  anchor.set_requires_grad(true);
  pair.half = values.detach();
  autograd::record(
      "keep_grad", {&anchor}, {&pair.half},
      [sink = pair.half_grad_sink](const std::vector<Tensor>& grads, const std::vector<bool>&) {
        *sink = grads[0];
        return std::vector<Tensor>{Tensor()};
      });
  return pair;
}

void expect_rounded_from(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what << " is undefined";
  ASSERT_EQ(actual.dtype(), DType::BFloat16) << what;
  ASSERT_EQ(expected.dtype(), DType::Float32) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const std::vector<float> a = actual.to(DType::Float32).to_vector<float>();
  const std::vector<float> e = expected.to_vector<float>();
  for (size_t i = 0; i < e.size(); ++i) {
    ASSERT_LE(std::abs(double(a[i]) - e[i]), kHalfUlp * std::abs(e[i]) + kFloatSlack)
        << what << " at " << i << ": " << a[i] << " vs float32 " << e[i];
  }
}

// float32 results of the two runs (batch-norm parameters' gradients, statistics): float32
// arithmetic on the same values, so equal up to summation order.
void expect_float_close(const Tensor& actual, const Tensor& expected, const std::string& what,
                        double relative = 1e-5) {
  ASSERT_TRUE(actual.defined()) << what << " is undefined";
  ASSERT_EQ(actual.dtype(), DType::Float32) << what;
  const std::vector<float> a = actual.to_vector<float>();
  const std::vector<float> e = expected.to_vector<float>();
  ASSERT_EQ(a.size(), e.size()) << what;
  for (size_t i = 0; i < e.size(); ++i) {
    ASSERT_NEAR(a[i], e[i], relative * (1.0 + std::abs(e[i]))) << what << " at " << i;
  }
}

// Backward from y with a random bfloat16 grad_y, and from the float32 twin with the same values.
void backward_both(const Tensor& y_half, const Tensor& y_full, uint64_t seed) {
  ASSERT_EQ(y_half.dtype(), DType::BFloat16);
  const Tensor grad = random_values(y_half.shape(), seed, y_half.memory_format());
  y_half.backward(grad);
  y_full.backward(grad.to(DType::Float32));
}

const MemoryFormat kFormats[] = {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast};

std::string name_of(MemoryFormat format) {
  return format == MemoryFormat::ChannelsLast ? "channels-last" : "NCHW";
}

using Op = std::function<Tensor(const std::vector<Tensor>&)>;

// Runs op on the bfloat16 values of `inputs` and on their float32 twins, and checks the output,
// its memory format and, after a backward from the same gradient, every input's gradient.
void check_against_float32(const std::string& what, const std::vector<Pair>& inputs, const Op& op,
                           uint64_t seed) {
  std::vector<Tensor> halves, fulls;
  for (const Pair& input : inputs) {
    halves.push_back(input.half);
    fulls.push_back(input.full);
  }
  const Tensor y_half = op(halves), y_full = op(fulls);
  EXPECT_EQ(y_half.memory_format(), y_full.memory_format()) << what;
  expect_rounded_from(y_half, y_full, what);
  backward_both(y_half, y_full, seed);
  for (size_t i = 0; i < inputs.size(); ++i) {
    expect_rounded_from(inputs[i].half_grad(), inputs[i].full.grad(),
                        what + " grad of input " + std::to_string(i));
  }
}

TEST(Bf16Ops, KernelNarrowingIsNoteHalfConversionsBitForBit) {
  // The CPU kernels' own narrow<BFloat16> (a float compare for NaN) against engine/half.h: every
  // sign, exponent and kept mantissa, with low halves at and around the rounding boundary, NaN
  // payloads that truncation would turn into infinity, subnormals and the carry into infinity.
  for (uint32_t high = 0; high <= 0xffffu; ++high) {
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      const uint32_t bits = high << 16 | low;
      float value;
      std::memcpy(&value, &bits, sizeof(value));
      ASSERT_EQ(cpu::narrow<BFloat16>(value).bits, BFloat16(value).bits) << std::hex << bits;
    }
  }
}

TEST(Bf16Ops, RoundsToNearestEvenOnce) {
  // 1 + 0.75 * 2^-7 lies between the bfloat16s 1 and 1 + 2^-7: nearest is the upper one, which
  // truncation would miss.
  const Tensor a = full({3}, 1.0, {.dtype = DType::BFloat16});
  const Tensor b = full({3}, 0.75 / 128, {.dtype = DType::BFloat16});
  EXPECT_EQ(add(a, b).to(DType::Float32).to_vector<float>(), std::vector<float>(3, 1.0078125f));
  // A tie (1 + 2^-8) goes to the even neighbour, 1.
  const Tensor tie = full({3}, 1.0 / 256, {.dtype = DType::BFloat16});
  EXPECT_EQ(add_relu(a, tie).to(DType::Float32).to_vector<float>(), std::vector<float>(3, 1.0f));
}

TEST(Bf16Ops, ReluForwardAndBackward) {
  for (MemoryFormat format : kFormats) {
    check_against_float32(
        "relu " + name_of(format), {twins({3, 5, 4, 6}, 1, format)},
        [](const auto& in) { return relu(in[0]); }, 2);
  }
}

TEST(Bf16Ops, AddBroadcastsForwardAndBackward) {
  for (MemoryFormat format : kFormats) {
    // b per channel: its gradient sums 120 values.
    check_against_float32(
        "add " + name_of(format), {twins({4, 3, 5, 6}, 3, format), twins({3, 1, 1}, 4)},
        [](const auto& in) { return add(in[0], in[1]); }, 5);
  }
}

TEST(Bf16Ops, AddReluForwardAndBackward) {
  for (MemoryFormat format : kFormats) {
    check_against_float32(
        "add_relu " + name_of(format),
        {twins({4, 8, 5, 5}, 6, format), twins({4, 8, 5, 5}, 7, format)},
        [](const auto& in) { return add_relu(in[0], in[1]); }, 8);
  }
}

TEST(Bf16Ops, SumForwardAndBackward) {
  // Mean 3: a sum rounded to bfloat16 once is within half an ulp; rounding each partial sum
  // would not be.
  const Pair x = twins({6, 7, 9}, 9, {}, 3.0f);
  expect_rounded_from(sum(x.half), sum(x.full), "sum");
  check_against_float32(
      "sum over dims 0, 2", {x},
      [](const auto& in) {
        return sum(in[0], {0, 2});
      },
      10);
}

struct BatchNormCase {
  MemoryFormat format;
  bool fuse_relu;
};

class Bf16BatchNorm : public ::testing::TestWithParam<BatchNormCase> {};

TEST_P(Bf16BatchNorm, TrainingMatchesFloat32) {
  const auto [format, fuse_relu] = GetParam();
  const int64_t c = 16;
  // Mean 2, so that statistics which assumed centred data would show.
  const Pair x = twins({4, c, 6, 5}, 11, format, 2.0f);
  Generator generator(12);
  Tensor gamma_half = randn({c}, generator, {}, 1.0f), beta_half = randn({c}, generator);
  Tensor gamma_full = gamma_half.clone(), beta_full = beta_half.clone();
  for (Tensor* p : {&gamma_half, &beta_half, &gamma_full, &beta_full}) p->set_requires_grad(true);
  Tensor mean_half = zeros({c}), var_half = ones({c}), mean_full = zeros({c}), var_full = ones({c});
  const BatchNormOptions options{.training = true, .fuse_relu = fuse_relu};
  const Tensor y_half = batch_norm2d(x.half, gamma_half, beta_half, mean_half, var_half, options);
  const Tensor y_full = batch_norm2d(x.full, gamma_full, beta_full, mean_full, var_full, options);
  EXPECT_EQ(y_half.memory_format(), format);
  expect_rounded_from(y_half, y_full, "y");
  // Statistics of the same values, in float32 both: equal but for summation order.
  expect_float_close(mean_half, mean_full, "running_mean", 1e-6);
  expect_float_close(var_half, var_full, "running_var", 1e-6);

  backward_both(y_half, y_full, 13);
  expect_rounded_from(x.half_grad(), x.full.grad(), "grad x");
  expect_float_close(gamma_half.grad(), gamma_full.grad(), "grad gamma");
  expect_float_close(beta_half.grad(), beta_full.grad(), "grad beta");
}

TEST_P(Bf16BatchNorm, InferenceMatchesFloat32) {
  const auto [format, fuse_relu] = GetParam();
  const int64_t c = 8;
  const Pair x = twins({3, c, 5, 4}, 14, format, 1.0f);
  Generator generator(15);
  const Tensor gamma = randn({c}, generator, {}, 1.0f), beta = randn({c}, generator);
  const Tensor running_mean = randn({c}, generator),
               running_var = uniform({c}, 0.5f, 2.0f, generator);
  const BatchNormOptions options{.training = false, .fuse_relu = fuse_relu};
  const Tensor y_half = batch_norm2d(x.half, gamma, beta, running_mean, running_var, options);
  const Tensor y_full = batch_norm2d(x.full, gamma, beta, running_mean, running_var, options);
  expect_rounded_from(y_half, y_full, "y");
  backward_both(y_half, y_full, 16);
  expect_rounded_from(x.half_grad(), x.full.grad(), "grad x");
}

INSTANTIATE_TEST_SUITE_P(Cases, Bf16BatchNorm,
                         ::testing::Values(BatchNormCase{MemoryFormat::Contiguous, false},
                                           BatchNormCase{MemoryFormat::Contiguous, true},
                                           BatchNormCase{MemoryFormat::ChannelsLast, false},
                                           BatchNormCase{MemoryFormat::ChannelsLast, true}),
                         [](const ::testing::TestParamInfo<BatchNormCase>& info) {
                           return std::string(info.param.format == MemoryFormat::ChannelsLast
                                                  ? "ChannelsLast"
                                                  : "Nchw") +
                                  (info.param.fuse_relu ? "Relu" : "");
                         });

// batch_norm2d_add_relu on channels-last (fused): the float32 kernel's value rounded once, y and
// both activations' gradients (the ReLU's mask is the same: bfloat16 keeps float32's exponents, so
// a value rounds to zero only if it is zero). Against the bfloat16 ops it replaces, batch_norm2d
// then add_relu, which round the normalised value v before adding the residual r: with h = 2^-8
// and ReLU 1-Lipschitz, |fused - composed| <= h|fused| + h|v|(1 + h) + h|composed|, so (with
// |fused| <= |composed| + the difference) at most h (|v|(1 + h) + 2|composed|) (1 + 2h) + slack,
// from the composed run's own v.
TEST(Bf16Ops, BatchNormAddReluChannelsLastMatchesFloat32AndTheComposedOps) {
  const MemoryFormat nhwc = MemoryFormat::ChannelsLast;
  const int64_t c = 16;
  const Pair x = twins({4, c, 6, 5}, 41, nhwc, 2.0f), r = twins({4, c, 6, 5}, 42, nhwc);
  Generator generator(43);
  Tensor gamma_half = randn({c}, generator, {}, 1.0f), beta_half = randn({c}, generator);
  Tensor gamma_full = gamma_half.clone(), beta_full = beta_half.clone();
  for (Tensor* p : {&gamma_half, &beta_half, &gamma_full, &beta_full}) p->set_requires_grad(true);
  const Tensor none;
  const Tensor y_half = batch_norm2d_add_relu(x.half, r.half, gamma_half, beta_half, none, none);
  const Tensor y_full = batch_norm2d_add_relu(x.full, r.full, gamma_full, beta_full, none, none);
  EXPECT_EQ(y_half.memory_format(), nhwc);
  expect_rounded_from(y_half, y_full, "y");
  backward_both(y_half, y_full, 44);
  expect_rounded_from(x.half_grad(), x.full.grad(), "grad x");
  expect_rounded_from(r.half_grad(), r.full.grad(), "grad residual");
  expect_float_close(gamma_half.grad(), gamma_full.grad(), "grad gamma");
  expect_float_close(beta_half.grad(), beta_full.grad(), "grad beta");

  const Tensor v = batch_norm2d(x.half, gamma_half, beta_half, none, none).detach();
  const Tensor composed = add_relu(v, r.half);
  const std::vector<float> fused_values = y_half.to(DType::Float32).to_vector<float>();
  const std::vector<float> composed_values = composed.to(DType::Float32).to_vector<float>();
  const std::vector<float> v_values = v.to(DType::Float32).to_vector<float>();
  for (size_t i = 0; i < fused_values.size(); ++i) {
    const double bound =
        kHalfUlp * (std::abs(v_values[i]) * (1 + kHalfUlp) + 2 * std::abs(composed_values[i])) *
            (1 + 2 * kHalfUlp) +
        kFloatSlack;
    ASSERT_LE(std::abs(double(fused_values[i]) - composed_values[i]), bound) << "y at " << i;
  }
}

TEST(Bf16Ops, BatchNormKeepsParametersFloat32) {
  const Tensor x = random_values({2, 3, 4, 4}, 17);
  const Tensor half_weight = ones({3}).to(DType::BFloat16);
  EXPECT_TRUE(
      contains(error_message([&] { batch_norm2d(x, half_weight, zeros({3}), Tensor(), Tensor()); }),
               "[batch_norm2d] weight is bfloat16, expected float32"));
}

TEST(Bf16Ops, AdaptiveAvgPoolForwardAndBackward) {
  for (MemoryFormat format : kFormats) {
    // 7x5 into 3x2: bins of 3 rows that overlap, so backward adds two shares into some cells.
    for (const auto& [h, w] : {std::pair<int64_t, int64_t>{3, 2}, {1, 1}}) {
      check_against_float32(
          "adaptive_avg_pool2d " + name_of(format) + " to " + std::to_string(h) + "x" +
              std::to_string(w),
          {twins({3, 6, 7, 5}, 18, format, 1.0f)},
          [h = h, w = w](const auto& in) { return adaptive_avg_pool2d(in[0], h, w); }, 19);
    }
  }
}

TEST(Bf16Ops, MaxPoolForwardAndBackward) {
  for (MemoryFormat format : kFormats) {
    // Windows of 3 with stride 2 overlap: backward adds two gradients into some inputs.
    check_against_float32(
        "max_pool2d " + name_of(format), {twins({2, 5, 9, 8}, 20, format)},
        [](const auto& in) {
          return max_pool2d(in[0], {.kernel_size = 3, .stride = 2, .padding = 1});
        },
        21);
  }
}

TEST(Bf16Ops, GradientsOfATensorUsedTwiceAccumulate) {
  // A residual block's input feeds the block and the shortcut: the autograd engine adds the two
  // bfloat16 gradients before passing them on.
  for (MemoryFormat format : kFormats) {
    // relu rounds nothing, so the output too is one rounding away from float32's.
    check_against_float32(
        "residual block " + name_of(format), {twins({2, 4, 3, 3}, 22, format)},
        [](const auto& in) { return add_relu(relu(in[0]), in[0]); }, 24);
  }
  // add_, what accumulates into a .grad, takes bfloat16 too: one rounding of the float32 sum.
  Tensor total = full({4}, 1.0, {.dtype = DType::BFloat16});
  add_(total, full({4}, 0.75 / 128, {.dtype = DType::BFloat16}));
  EXPECT_EQ(total.to(DType::Float32).to_vector<float>(), std::vector<float>(4, 1.0078125f));
}

TEST(Bf16Ops, MixedDtypesAreAnErrorNamingBoth) {
  const Tensor half = random_values({2, 3}, 25);
  const Tensor single = half.to(DType::Float32);
  const std::string add_error = error_message([&] { add(half, single); });
  EXPECT_TRUE(contains(add_error, "[add] a is bfloat16 but b is float32")) << add_error;
  const std::string relu_error = error_message([&] { add_relu(single, half); });
  EXPECT_TRUE(contains(relu_error, "[add_relu] a is float32 but b is bfloat16")) << relu_error;
  Tensor accumulated = single.clone();
  EXPECT_TRUE(contains(error_message([&] { add_(accumulated, half); }),
                       "[add_] self is float32 but other is bfloat16"));
}

TEST(Bf16Ops, OtherOpsStillRefuseBfloat16) {
  const Tensor half = random_values({2, 3}, 26);
  for (const auto& [op, run] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"mul", [&] { mul(half, half); }},
           {"sub", [&] { sub(half, half); }},
           {"exp", [&] { exp(half); }},
           {"mul_scalar", [&] { mul(half, 2.0f); }},
       }) {
    const std::string message = error_message(run);
    EXPECT_TRUE(contains(message, "[" + op + "]") && contains(message,
                                                              "is bfloat16, expected "
                                                              "float32"))
        << message;
  }
}

}  // namespace
}  // namespace tandem
