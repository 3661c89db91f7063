#include <gtest/gtest.h>
#include <omp.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/cpu/dnnl_context.h"
#include "engine/tandem.h"
#include "tests/support/error_message.h"
#include "tests/support/gradcheck.h"
#include "tests/support/reference_ops.h"
#include "tests/support/tensor_compare.h"

namespace tandem {
namespace {

using testing::error_message;

using testing::check_gradients;
using testing::ConvShape;
using testing::expect_close_elementwise;
using Inputs = std::vector<Tensor>;

Tensor random(const Shape& shape, uint64_t seed, bool requires_grad = false) {
  Generator generator(seed);
  return randn(shape, generator, {.requires_grad = requires_grad});
}

class Conv2dAgainstReference : public ::testing::TestWithParam<std::tuple<ConvShape, bool>> {};

TEST_P(Conv2dAgainstReference, ForwardAndBothBackwards) {
  const auto& [s, with_bias] = GetParam();
  const Tensor x = random({s.n, s.c, s.h, s.w}, 1, true);
  const Tensor w = random({s.k, s.c, s.r, s.s}, 2, true);
  const Tensor b = with_bias ? random({s.k}, 3, true) : Tensor();
  const Tensor y = conv2d(x, w, b, {.stride = s.stride, .padding = s.padding});
  ASSERT_EQ(y.shape(), (Shape{s.n, s.k, s.p(), s.q()}));
  const auto xv = x.to_vector<float>(), wv = w.to_vector<float>();
  const auto bv = with_bias ? b.to_vector<float>() : std::vector<float>();
  // Tolerance: float32 sums of up to C·R·S = 288 products against a double reference.
  expect_close_elementwise(y.to_vector<float>(), testing::reference_conv2d(s, xv, wv, bv), 1e-4f,
                           "forward");

  const Tensor grad_y = random(y.shape(), 4);
  sum(mul(y, grad_y)).backward();
  std::vector<float> gx, gw, gb;
  testing::reference_conv2d_backward(s, xv, wv, grad_y.to_vector<float>(), gx, gw, gb);
  expect_close_elementwise(x.grad().to_vector<float>(), gx, 1e-4f, "grad input");
  expect_close_elementwise(w.grad().to_vector<float>(), gw, 1e-4f, "grad weight");
  if (with_bias) expect_close_elementwise(b.grad().to_vector<float>(), gb, 1e-4f, "grad bias");
}

INSTANTIATE_TEST_SUITE_P(
    ResNetShapes, Conv2dAgainstReference,
    ::testing::Combine(
        ::testing::Values(ConvShape{3, 16, 8, 8, 16, 3, 3, 1, 1},  // 3x3, stride 1
                          ConvShape{2, 16, 8, 8, 32, 3, 3, 2, 1},  // 3x3, stride 2
                          ConvShape{2, 16, 8, 8, 32, 1, 1, 2, 0},  // 1x1 shortcut
                          ConvShape{1, 3, 5, 7, 4, 3, 3, 1, 1},    // odd sizes, RGB stem
                          ConvShape{2, 4, 7, 5, 3, 2, 3, 2, 0}),   // non-square kernel
        ::testing::Bool()));

TEST(Conv2dGrad, FiniteDifferences) {
  const Tensor x = random({2, 3, 5, 4}, 5, true);
  const Tensor w = random({4, 3, 3, 3}, 6, true);
  const Tensor b = random({4}, 7, true);
  EXPECT_TRUE(check_gradients(
      [](const Inputs& in) { return conv2d(in[0], in[1], in[2], {.stride = 1, .padding = 1}); },
      {x, w, b}));
  EXPECT_TRUE(check_gradients(
      [](const Inputs& in) { return conv2d(in[0], in[1], Tensor(), {.stride = 2, .padding = 1}); },
      {x, w}));
}

TEST(Conv2d, OnlyTheNeededGradientsAreComputed) {
  // The first layer's input needs no gradient: only the weight gets one.
  const Tensor x = random({1, 3, 4, 4}, 8);
  const Tensor w = random({2, 3, 3, 3}, 9, true);
  sum(conv2d(x, w, Tensor(), {.padding = 1})).backward();
  EXPECT_TRUE(w.grad().defined());
  EXPECT_FALSE(x.grad().defined());
}

TEST(Conv2d, BadArgumentsAreClearErrors) {
  const Tensor x = zeros({1, 64, 8, 8});
  const Tensor w = zeros({16, 64, 3, 3});
  const std::vector<std::pair<std::string, std::function<void()>>> cases = {
      {"[conv2d] input has 64 channels but weight expects 32 (weight shape [16, 32, 3, 3])",
       [&] {
         conv2d(x, zeros({16, 32, 3, 3}));
       }},
      {"[conv2d] weight has 3 dims",
       [&] {
         conv2d(x, zeros({16, 64, 3}));
       }},
      {"[conv2d] input has 3 dims",
       [&] {
         conv2d(zeros({64, 8, 8}), w);
       }},
      {"[conv2d] kernel 11x11 is larger than the padded input 10x10",
       [&] {
         conv2d(x, zeros({16, 64, 11, 11}), Tensor(), {.padding = 1});
       }},
      {"[conv2d] needs stride >= 1", [&] { conv2d(x, w, Tensor(), {.stride = 0}); }},
      {"[conv2d] needs stride >= 1 and padding >= 0, got stride 1 padding -1",
       [&] { conv2d(x, w, Tensor(), {.padding = -1}); }},
      {"[conv2d] bias has shape [8], expected [16]", [&] { conv2d(x, w, zeros({8})); }},
      {"[conv2d] bias is int64", [&] { conv2d(x, w, zeros({16}, {.dtype = DType::Int64})); }},
      {"[conv2d] input is int64",
       [&] {
         conv2d(zeros({1, 64, 8, 8}, {.dtype = DType::Int64}), w);
       }},
      {"[conv2d] tensors on different devices",
       [&] {
         conv2d(x, zeros({16, 64, 3, 3}, {.device = Device::cpu(1)}));
       }},
  };
  for (const auto& [expected, call] : cases) {
    EXPECT_NE(error_message(call).find(expected), std::string::npos)
        << "expected \"" << expected << "\", got \"" << error_message(call) << "\"";
  }
}

// Note [oneDNN thread count] in engine/cpu/dnnl_context.h: a primitive keeps the OpenMP thread
// count it was created with, so the cache must create under tandem's count and key by it.
TEST(OneDnnPrimitiveCache, CreatesUnderAndKeysByTheThreadCount) {
  cpu::dnnl_context::PrimitiveCache<int> cache;
  std::vector<int> created_with;  // the OpenMP thread count each create() saw
  const auto create = [&] {
    created_with.push_back(omp_get_max_threads());
    return 0;
  };
  {
    ThreadCountGuard three(3);
    omp_set_num_threads(1);  // a stale count left on this thread by earlier work
    cache.get("shape", create);
    cache.get("shape", create);  // reused
  }
  {
    ThreadCountGuard one(1);
    cache.get("shape", create);  // a different thread count needs its own primitive
  }
  EXPECT_EQ(created_with, (std::vector<int>{3, 1}));
}

}  // namespace
}  // namespace tandem
