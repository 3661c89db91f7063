// cublas_gemm_args (Note [Row-major GEMM on cuBLAS]) fed to a CPU column-major sgemm written
// from the reference BLAS definition, against a row-major product computed directly.

#include "engine/cuda/gemm_args.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <random>
#include <vector>

#include "tests/support/error_message.h"

namespace tandem::cuda {
namespace {

using testing::contains;
using testing::error_message;

// C := alpha op(A) op(B) + beta C, column-major, with the argument checks cuBLAS makes (its
// CUBLAS_STATUS_INVALID_VALUE cases). vector::at turns any read or write outside the buffers
// into an exception.
void reference_sgemm(const CublasGemmArgs& g, float alpha, const std::vector<float>& a,
                     const std::vector<float>& b, float beta, std::vector<float>& c) {
  ASSERT_GE(g.m, 0);
  ASSERT_GE(g.n, 0);
  ASSERT_GE(g.k, 0);
  ASSERT_GE(g.lda, std::max(1, g.transa ? g.k : g.m));
  ASSERT_GE(g.ldb, std::max(1, g.transb ? g.n : g.k));
  ASSERT_GE(g.ldc, std::max(1, g.m));
  for (int j = 0; j < g.n; ++j) {
    for (int i = 0; i < g.m; ++i) {
      float sum = 0.0f;
      for (int l = 0; l < g.k; ++l) {
        const float av = g.transa ? a.at(l + (i * g.lda)) : a.at(i + (l * g.lda));
        const float bv = g.transb ? b.at(j + (l * g.ldb)) : b.at(l + (j * g.ldb));
        sum += av * bv;
      }
      float& out = c.at(i + (j * g.ldc));
      out = alpha * sum + beta * out;
    }
  }
}

std::vector<float> random_values(size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> value(-4, 4);  // small integers: exact float sums
  std::vector<float> out(n);
  for (float& v : out) v = static_cast<float>(value(rng));
  return out;
}

// Row-major a: (m, k), or (k, m) when transposed; likewise b.
float at(const std::vector<float>& x, int64_t cols, bool transposed, int64_t r, int64_t c) {
  return transposed ? x[static_cast<size_t>((c * cols) + r)]
                    : x[static_cast<size_t>((r * cols) + c)];
}

TEST(CublasGemmArgs, MatchRowMajorProductThroughColumnMajorSgemm) {
  std::mt19937 rng(15);
  std::uniform_int_distribution<int64_t> size(1, 7);
  for (int trial = 0; trial < 200; ++trial) {
    const bool ta = (trial & 1) != 0;
    const bool tb = (trial & 2) != 0;
    const int64_t m = size(rng);
    const int64_t n = size(rng);
    const int64_t k = size(rng);
    const Shape a_shape = ta ? Shape{k, m} : Shape{m, k};
    const Shape b_shape = tb ? Shape{n, k} : Shape{k, n};
    const std::vector<float> a = random_values(static_cast<size_t>(m * k), rng);
    const std::vector<float> b = random_values(static_cast<size_t>(k * n), rng);
    std::vector<float> c = random_values(static_cast<size_t>(m * n), rng);
    const float alpha = 1.5f;
    const float beta = 0.5f;

    std::vector<float> expected(c.size());
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t col = 0; col < n; ++col) {
        float sum = 0.0f;
        for (int64_t l = 0; l < k; ++l) {
          sum += at(a, a_shape[1], ta, r, l) * at(b, b_shape[1], tb, l, col);
        }
        const auto index = static_cast<size_t>((r * n) + col);
        expected[index] = alpha * sum + beta * c[index];
      }
    }
    const CublasGemmArgs args = cublas_gemm_args(ta, tb, a_shape, b_shape);
    EXPECT_EQ(args.m, n);
    EXPECT_EQ(args.n, m);
    EXPECT_EQ(args.k, k);
    // cuBLAS's A is Tandem's b (Note [Row-major GEMM on cuBLAS]).
    reference_sgemm(args, alpha, b, a, beta, c);
    ASSERT_EQ(c, expected) << "m " << m << " n " << n << " k " << k << " ta " << ta << " tb " << tb;
  }
}

TEST(CublasGemmArgs, LeadingDimensionsStayPositiveForEmptyMatrices) {
  const CublasGemmArgs args = cublas_gemm_args(false, false, {3, 0}, {0, 0});
  EXPECT_EQ(args.k, 0);
  EXPECT_EQ(args.m, 0);
  EXPECT_EQ(args.lda, 1);
  EXPECT_EQ(args.ldb, 1);
  EXPECT_EQ(args.ldc, 1);
}

TEST(CublasGemmArgs, BadShapesAreOneLineErrors) {
  EXPECT_TRUE(contains(error_message([] {
                         cublas_gemm_args(false, false, {2, 3}, {4, 5});
                       }),
                       "[gemm] inner dims differ: [2, 3] times [4, 5]"));
  EXPECT_TRUE(contains(error_message([] {
                         cublas_gemm_args(true, false, {2, 3}, {3, 5});
                       }),
                       "[gemm] inner dims differ: [2, 3] transposed times [3, 5]"));
  EXPECT_TRUE(contains(error_message([] {
                         cublas_gemm_args(false, false, {2}, {2, 5});
                       }),
                       "[gemm] needs 2-D operands"));
  const int64_t big = int64_t{INT_MAX} + 1;
  EXPECT_TRUE(contains(error_message([&] {
                         cublas_gemm_args(false, false, {1, big}, {big, 1});
                       }),
                       "[gemm] dimensions beyond 2^31 are not supported"));
}

}  // namespace
}  // namespace tandem::cuda
