// The bodies of elementwise.cu (unary, binary contiguous and broadcast, the conv bias add) on a
// CPU grid, against the CPU backend.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/cuda/kernels/elementwise.h"
#include "engine/tandem.h"
#include "tests/engine/cuda/kernels/body_checks.h"
#include "tests/support/cpu_grid.h"

namespace tandem::testing {
namespace {

namespace k = cuda::kernels;

template <UnaryOp kOp>
void check_unary(UnaryOp op, float scalar, float low, float high) {
  const std::string what = "unary op " + std::to_string(static_cast<int>(op));
  for (const int64_t n : {1, 1000, 4099}) {
    const Tensor in = random_tensor({n}, n, low, high);
    Tensor expected = empty({n});
    cpu().unary(op, in, scalar, expected);
    for (const CpuGrid& grid : grids_for(n)) {
      Tensor actual = empty({n});
      run_grid_stride(k::UnaryBody<kOp>{in.data<float>(), scalar, actual.data<float>(), n}, grid);
      // Host libm against the CPU backend's std:: calls: a few ulp apart at most.
      expect_all_near(actual.to_vector<float>(), expected.to_vector<float>(), 1e-6, what);
    }
    Tensor in_place = in.clone();  // out aliases in, as the backend allows
    run_grid_stride(k::UnaryBody<kOp>{in_place.data<float>(), scalar, in_place.data<float>(), n});
    expect_all_near(in_place.to_vector<float>(), expected.to_vector<float>(), 1e-6, what);
  }
}

TEST(UnaryBodies, MatchTheCpuBackendForEveryOp) {
  check_unary<UnaryOp::Neg>(UnaryOp::Neg, 0.0f, -3.0f, 3.0f);
  check_unary<UnaryOp::Relu>(UnaryOp::Relu, 0.0f, -3.0f, 3.0f);
  check_unary<UnaryOp::Exp>(UnaryOp::Exp, 0.0f, -10.0f, 10.0f);
  check_unary<UnaryOp::Log>(UnaryOp::Log, 0.0f, 1e-3f, 100.0f);
  check_unary<UnaryOp::Sqrt>(UnaryOp::Sqrt, 0.0f, 0.0f, 100.0f);
  check_unary<UnaryOp::AddScalar>(UnaryOp::AddScalar, 0.75f, -3.0f, 3.0f);
  check_unary<UnaryOp::MulScalar>(UnaryOp::MulScalar, -1.5f, -3.0f, 3.0f);
  check_unary<UnaryOp::PowScalar>(UnaryOp::PowScalar, 2.5f, 0.0f, 4.0f);
}

// out's shape and, per dim, whether a and b are broadcast along it (size 1 in their shape).
struct BroadcastCase {
  Shape out, a, b;
};
BroadcastCase random_broadcast(std::mt19937_64& random) {
  BroadcastCase c;
  const int64_t rank = random_int(random, 1, 5);
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t size = random_int(random, 1, 7);
    c.out.push_back(size);
    c.a.push_back(random_int(random, 0, 3) == 0 ? 1 : size);
    c.b.push_back(random_int(random, 0, 2) == 0 ? 1 : size);
  }
  return c;
}

// The broadcast layout as the CUDA backend hands it over, without merging dims: a and b are
// contiguous in their own shapes, stride 0 where broadcast.
k::BroadcastLayout layout_of(const BroadcastCase& c) {
  k::BroadcastLayout layout;
  layout.rank = static_cast<int>(c.out.size());
  const Shape a_strides = contiguous_strides(c.a), b_strides = contiguous_strides(c.b);
  for (int d = 0; d < layout.rank; ++d) {
    layout.size[d] = c.out[d];
    layout.a_stride[d] = c.a[d] == 1 ? 0 : a_strides[d];
    layout.b_stride[d] = c.b[d] == 1 ? 0 : b_strides[d];
  }
  return layout;
}

template <BinaryOp kOp, typename T>
void check_binary(BinaryOp op, const Tensor& a, const Tensor& b, const BroadcastCase& c,
                  const std::string& what) {
  Tensor expected = empty(c.out);
  cpu().binary(op, a, b, expected);
  const int64_t n = expected.numel();
  for (const CpuGrid& grid : grids_for(n)) {
    Tensor actual = full(c.out, -7.0);
    if (c.a == c.out && c.b == c.out) {
      run_grid_stride(
          k::BinaryContiguousBody<kOp, T>{a.data<T>(), b.data<T>(), actual.data<float>(), n}, grid);
    } else {
      run_grid_stride(k::BinaryBroadcastBody<kOp, T>{a.data<T>(), b.data<T>(), layout_of(c),
                                                     actual.data<float>(), n},
                      grid);
    }
    expect_all_equal(actual.to_vector<float>(), expected.to_vector<float>(), what);
  }
}

void check_every_binary_op(const BroadcastCase& c, uint64_t seed) {
  const Tensor a = random_tensor(c.a, seed), b = random_tensor(c.b, seed + 1);
  const std::string what = "seed " + std::to_string(seed);
  check_binary<BinaryOp::Add, float>(BinaryOp::Add, a, b, c, what + " add");
  check_binary<BinaryOp::Sub, float>(BinaryOp::Sub, a, b, c, what + " sub");
  check_binary<BinaryOp::Mul, float>(BinaryOp::Mul, a, b, c, what + " mul");
  check_binary<BinaryOp::Div, float>(BinaryOp::Div, a, b, c, what + " div");
  check_binary<BinaryOp::ReluBackward, float>(BinaryOp::ReluBackward, a, b, c, what + " relu'");
  check_binary<BinaryOp::AddRelu, float>(BinaryOp::AddRelu, a, b, c, what + " add_relu");
  // Equal on float32 and int64, with values drawn from a small set so that some are equal.
  Generator generator(seed);
  const Tensor ia = uniform(c.a, 0.0f, 3.0f, generator).to(DType::Int64);
  const Tensor ib = uniform(c.b, 0.0f, 3.0f, generator).to(DType::Int64);
  check_binary<BinaryOp::Equal, int64_t>(BinaryOp::Equal, ia, ib, c, what + " equal int64");
  check_binary<BinaryOp::Equal, float>(BinaryOp::Equal, ia.to(DType::Float32),
                                       ib.to(DType::Float32), c, what + " equal float");
}

// Note [NaN through ReLU and max pooling]: NaN, infinities and signed zeros, bit for bit as the
// CPU backend, which follows PyTorch.
TEST(UnaryBodies, ReluPassesNaNAndKeepsSignedZerosLikeTheCpuBackend) {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> values = {nan, -nan, -0.0f, 0.0f, -inf, inf, -1.5f, 2.5f};
  const Tensor in = from_vector(values, {static_cast<int64_t>(values.size())});
  Tensor expected = empty_like(in), actual = empty_like(in);
  cpu().unary(UnaryOp::Relu, in, 0.0f, expected);
  run_grid_stride(
      k::UnaryBody<UnaryOp::Relu>{in.data<float>(), 0.0f, actual.data<float>(), in.numel()});
  expect_all_equal(actual.to_vector<float>(), expected.to_vector<float>(), "relu");
  EXPECT_TRUE(std::isnan(actual.to_vector<float>()[0]));
}

TEST(BinaryBodies, AddReluAndReluBackwardPassNaNLikeTheCpuBackend) {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  // Every pair of these: NaN on either side, inf - inf, zeros of both signs.
  const std::vector<float> values = {nan, -0.0f, 0.0f, -inf, inf, -1.5f, 2.5f};
  std::vector<float> a, b;
  for (const float x : values) {
    for (const float y : values) a.push_back(x), b.push_back(y);
  }
  const auto n = static_cast<int64_t>(a.size());
  const BroadcastCase c{{n}, {n}, {n}};
  check_binary<BinaryOp::AddRelu, float>(BinaryOp::AddRelu, from_vector(a, {n}),
                                         from_vector(b, {n}), c, "add_relu with NaN");
  check_binary<BinaryOp::ReluBackward, float>(BinaryOp::ReluBackward, from_vector(a, {n}),
                                              from_vector(b, {n}), c, "relu' with NaN");
}

TEST(BinaryBodies, ContiguousMatchTheCpuBackendForEveryOp) {
  for (const int64_t n : {1, 257, 3000}) check_every_binary_op({{n}, {n}, {n}}, n);
}

TEST(BinaryBodies, BroadcastMatchTheCpuBackendOnRandomShapes) {
  std::mt19937_64 random(3);
  for (int round = 0; round < 60; ++round) check_every_binary_op(random_broadcast(random), round);
}

TEST(AddChannelBiasBodies, MatchABroadcastAddOnTheCpuBackend) {
  std::mt19937_64 random(5);
  for (int round = 0; round < 30; ++round) {
    const int64_t n = random_int(random, 1, 3), kk = random_int(random, 1, 9);
    const int64_t pq = random_int(random, 1, 50);
    const Tensor y = random_tensor({n, kk, pq}, round), bias = random_tensor({1, kk, 1}, 99);
    Tensor expected = empty({n, kk, pq});
    cpu().binary(BinaryOp::Add, y, bias, expected);
    for (const CpuGrid& grid : grids_for(y.numel())) {
      Tensor actual = y.clone();
      run_grid_stride(
          k::AddChannelBiasBody{actual.data<float>(), bias.data<float>(), kk, pq, y.numel()}, grid);
      expect_all_equal(actual.to_vector<float>(), expected.to_vector<float>(),
                       "round " + std::to_string(round));
    }
  }
}

TEST(UnaryBodies, Int64ScalarAddMatchesTheCpuBackend) {
  for (const int64_t n : {1, 1000}) {
    std::vector<int64_t> values(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = (i - 7) * 1000000007;
    const Tensor in = from_vector(values, {n}, {.dtype = DType::Int64});
    Tensor expected = empty({n}, {.dtype = DType::Int64});
    cpu().unary(UnaryOp::AddScalar, in, 3.0f, expected);
    for (const CpuGrid& grid : grids_for(n)) {
      Tensor actual = in.clone();  // in place, as batch norm's counter is bumped
      run_grid_stride(k::AddScalarInt64Body{actual.data<int64_t>(), 3, actual.data<int64_t>(), n},
                      grid);
      EXPECT_EQ(actual.to_vector<int64_t>(), expected.to_vector<int64_t>());
    }
  }
}

}  // namespace
}  // namespace tandem::testing
