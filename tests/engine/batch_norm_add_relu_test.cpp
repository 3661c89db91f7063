// batch_norm2d_add_relu (a residual block's bn2, shortcut sum and ReLU) against the ops it
// replaces, batch_norm2d then add_relu: float32 forward, running statistics and gradients, in
// training on the fused channels-last path and the composed NCHW one, and in evaluation; its
// backward against finite differences; its argument checks. bfloat16 is in bf16_ops_test.cpp.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/tandem.h"
#include "tests/support/error_message.h"
#include "tests/support/gradcheck.h"
#include "tests/support/tensor_compare.h"

namespace tandem {
namespace {

using testing::check_gradients;
using testing::error_message;
using testing::expect_close_to_reference;
using Inputs = std::vector<Tensor>;

constexpr MemoryFormat kNhwc = MemoryFormat::ChannelsLast;

Tensor random(const Shape& shape, uint64_t seed, float mean = 0.0f) {
  Generator generator(seed);
  return randn(shape, generator, {}, mean);
}

// x, residual, gamma, beta of a block's end of `shape` in `format`.
std::vector<Tensor> block_end(const Shape& shape, MemoryFormat format, uint64_t seed) {
  return {random(shape, seed, 1.0f).contiguous(format), random(shape, seed + 1).contiguous(format),
          random({shape[1]}, seed + 2, 1.0f), random({shape[1]}, seed + 3)};
}

// The output, then every input's gradient of sum(output * direction), on fresh leaves holding
// `values`.
std::vector<Tensor> output_and_gradients(const std::function<Tensor(const Inputs&)>& fn,
                                         const Inputs& values) {
  Inputs leaves;
  for (const Tensor& v : values) leaves.push_back(v.clone().set_requires_grad(true));
  const Tensor out = fn(leaves);
  Generator generator(77);
  sum(mul(out, randn(out.shape(), generator))).backward();
  std::vector<Tensor> result{out};
  for (const Tensor& leaf : leaves) result.push_back(leaf.grad());
  return result;
}

struct Running {
  Tensor mean = zeros({8});
  Tensor var = ones({8});
};

// Float32: the fused kernel computes the composed ops' arithmetic in the composed order (the
// normalised value, then + residual, then max with 0; the ReLU's mask, then batch norm's sums
// over it, the same blocks in the same order), so every value is the same float on either path.
TEST(BatchNormAddRelu, Float32TrainingEqualsBatchNormThenAddRelu) {
  for (const MemoryFormat format : {kNhwc, MemoryFormat::Contiguous}) {  // fused, composed
    const std::string what = format == kNhwc ? "channels-last" : "NCHW";
    const Inputs values = block_end({4, 8, 5, 5}, format, 11);
    Running fused_stats, composed_stats;
    const auto fused = output_and_gradients(
        [&](const Inputs& in) {
          return batch_norm2d_add_relu(in[0], in[1], in[2], in[3], fused_stats.mean,
                                       fused_stats.var, {.momentum = 0.2f});
        },
        values);
    const auto composed = output_and_gradients(
        [&](const Inputs& in) {
          return add_relu(batch_norm2d(in[0], in[2], in[3], composed_stats.mean, composed_stats.var,
                                       {.momentum = 0.2f}),
                          in[1]);
        },
        values);
    EXPECT_EQ(fused[0].memory_format(), format) << what;
    EXPECT_EQ(fused[0].to_vector<float>(), composed[0].to_vector<float>()) << what << " output";
    for (size_t i = 1; i < fused.size(); ++i) {
      EXPECT_EQ(fused[i].to_vector<float>(), composed[i].to_vector<float>())
          << what << " gradient of input " << i;
    }
    EXPECT_EQ(fused_stats.mean.to_vector<float>(), composed_stats.mean.to_vector<float>()) << what;
    EXPECT_EQ(fused_stats.var.to_vector<float>(), composed_stats.var.to_vector<float>()) << what;
  }
}

TEST(BatchNormAddRelu, EvaluationUsesTheRunningStatistics) {
  const Inputs values = block_end({3, 8, 4, 4}, kNhwc, 21);
  const Tensor mean = random({8}, 25), var = add(pow(random({8}, 26), 2.0f), 0.5f);
  const BatchNormOptions eval{.training = false};
  const auto fused = output_and_gradients(
      [&](const Inputs& in) {
        return batch_norm2d_add_relu(in[0], in[1], in[2], in[3], mean, var, eval);
      },
      values);
  const auto composed = output_and_gradients(
      [&](const Inputs& in) {
        return add_relu(batch_norm2d(in[0], in[2], in[3], mean, var, eval), in[1]);
      },
      values);
  for (size_t i = 0; i < fused.size(); ++i) {
    EXPECT_EQ(fused[i].to_vector<float>(), composed[i].to_vector<float>()) << i;
  }
}

// The residual is r = ±(2 + |noise|), gamma 0.3: |batch_norm(x)| stays under 0.3 * sqrt(N*H*W)
// + |beta| < 1.5, so every output is 0.5 or more away from the ReLU's kink, which the central
// differences (steps of 1e-2) then never cross; about half the outputs are masked.
TEST(BatchNormAddRelu, GradientsMatchFiniteDifferences) {
  for (const MemoryFormat format : {kNhwc, MemoryFormat::Contiguous}) {
    const Shape shape{2, 3, 3, 3};
    std::vector<float> r = random(shape, 31).to_vector<float>();
    for (float& v : r) v = (v < 0 ? -1.0f : 1.0f) * (2.0f + std::abs(v));
    const Tensor x = random(shape, 32).contiguous(format).set_requires_grad(true);
    const Tensor residual = from_vector(r, shape).contiguous(format).set_requires_grad(true);
    const Tensor gamma = full({3}, 0.3).set_requires_grad(true);
    const Tensor beta = mul(random({3}, 33), 0.1f).detach().set_requires_grad(true);
    EXPECT_TRUE(check_gradients(
        [](const Inputs& in) {
          return batch_norm2d_add_relu(in[0], in[1], in[2], in[3], Tensor(), Tensor());
        },
        {x, residual, gamma, beta}))
        << (format == kNhwc ? "channels-last" : "NCHW");
  }
}

// A residual that needs no gradient (a frozen shortcut) still gets its input's gradients right.
TEST(BatchNormAddRelu, AResidualWithoutGradient) {
  const Inputs values = block_end({2, 8, 3, 3}, kNhwc, 41);
  const Tensor residual = values[1];
  const auto fused = output_and_gradients(
      [&](const Inputs& in) {
        return batch_norm2d_add_relu(in[0], residual, in[2], in[3], Tensor(), Tensor());
      },
      values);
  const auto composed = output_and_gradients(
      [&](const Inputs& in) {
        return add_relu(batch_norm2d(in[0], in[2], in[3], Tensor(), Tensor()), residual);
      },
      values);
  EXPECT_FALSE(fused[2].defined());
  expect_close_to_reference(fused[1], composed[1], "grad x", 0.0);
}

TEST(BatchNormAddRelu, BadResidualsAreClearErrors) {
  const Tensor x = zeros({2, 3, 4, 4}), none;
  const std::vector<std::pair<std::string, std::function<void()>>> cases = {
      {"[batch_norm2d_add_relu] needs a residual",
       [&] { batch_norm2d_add_relu(x, none, none, none, none, none); }},
      {"[batch_norm2d_add_relu] residual has shape [2, 3, 4], expected [2, 3, 4, 4]",
       [&] {
         batch_norm2d_add_relu(x, zeros({2, 3, 4}), none, none, none, none);
       }},
      {"[batch_norm2d_add_relu] input is float32 but residual is bfloat16",
       [&] {
         batch_norm2d_add_relu(x, zeros({2, 3, 4, 4}, {.dtype = DType::BFloat16}), none, none, none,
                               none);
       }},
  };
  for (const auto& [expected, call] : cases) {
    EXPECT_NE(error_message(call).find(expected), std::string::npos)
        << "expected \"" << expected << "\", got \"" << error_message(call) << "\"";
  }
}

}  // namespace
}  // namespace tandem
