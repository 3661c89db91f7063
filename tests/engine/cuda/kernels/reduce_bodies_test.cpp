// The per-thread bodies of reduce.cu, the reduction plan (kernels/sum_plan.h) and the
// ReduceLayout that the CUDA backend builds (kernels/reduce_layout.h), against the CPU backend.

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/cuda/kernels/reduce.h"
#include "engine/cuda/kernels/reduce_layout.h"
#include "engine/cuda/kernels/sum_plan.h"
#include "engine/tandem.h"
#include "tests/engine/cuda/kernels/body_checks.h"
#include "tests/support/cpu_grid.h"
#include "tests/support/error_message.h"

namespace tandem::testing {
namespace {

namespace k = cuda::kernels;

// A random shape of 1 to 6 dims and a random subset of them to reduce.
struct SumCase {
  Shape shape;
  std::vector<int64_t> dims;
};
SumCase random_sum(std::mt19937_64& random) {
  SumCase c;
  const int64_t rank = random_int(random, 1, 6);
  for (int64_t d = 0; d < rank; ++d) {
    c.shape.push_back(random_int(random, 1, 5));
    if (random_int(random, 0, 1) == 1) c.dims.push_back(d);
  }
  return c;
}

std::string describe(const SumCase& c) {
  std::ostringstream text;
  text << "shape";
  for (const int64_t size : c.shape) text << ' ' << size;
  text << ", dims";
  for (const int64_t d : c.dims) text << ' ' << d;
  return text.str();
}

Tensor cpu_sum(const Tensor& in, const std::vector<int64_t>& dims) {
  Shape shape = in.shape();
  for (const int64_t d : dims) shape[d] = 1;
  Tensor out = empty(shape);
  cpu().sum(in, dims, out);
  return out;
}

TEST(SumBodies, PerThreadMatchesTheCpuBackendOnRandomReductions) {
  std::mt19937_64 random(37);
  for (int round = 0; round < 300; ++round) {
    const SumCase c = random_sum(random);
    const Tensor in = random_tensor(c.shape, round);
    const Tensor expected = cpu_sum(in, c.dims);
    const k::ReduceLayout layout = k::reduce_layout(c.shape, c.dims);
    ASSERT_EQ(layout.outputs, expected.numel()) << describe(c);
    ASSERT_EQ(layout.outputs * layout.reduce_count, in.numel()) << describe(c);
    for (const CpuGrid& grid : grids_for(layout.outputs)) {
      std::vector<float> actual(static_cast<size_t>(layout.outputs), -7.0f);
      run_grid_stride(k::SumPerThreadBody{in.data<float>(), layout, actual.data(), layout.outputs},
                      grid);
      expect_all_near(actual, expected.to_vector<float>(), 1e-5, describe(c));
    }
  }
}

TEST(SumBodies, PartialsAreAddedInSplitOrder) {
  const int64_t outputs = 37, splits = 9;
  std::vector<double> partials(static_cast<size_t>(outputs * splits));
  std::mt19937_64 random(41);
  for (double& p : partials) p = std::uniform_real_distribution<double>(-1e3, 1e3)(random);
  std::vector<float> expected(static_cast<size_t>(outputs));
  for (int64_t o = 0; o < outputs; ++o) {
    double total = 0.0;
    for (int64_t s = 0; s < splits; ++s) total += partials[o * splits + s];
    expected[o] = static_cast<float>(total);
  }
  for (const CpuGrid& grid : grids_for(outputs)) {
    std::vector<float> actual(static_cast<size_t>(outputs), -7.0f);
    run_grid_stride(k::SumPartialsBody{partials.data(), splits, actual.data(), outputs}, grid);
    expect_all_equal(actual, expected, "partials");
  }
}

k::ReduceLayout counts(int64_t outputs, int64_t reduce_count) {
  k::ReduceLayout layout;
  layout.outputs = outputs;
  layout.reduce_count = reduce_count;
  return layout;
}

TEST(SumPlan, ShortSumsOrManyOutputsGetOneThreadEach) {
  EXPECT_TRUE(k::plan_sum(counts(1, 32), 108).per_thread);  // 32 terms: never worth a block
  EXPECT_FALSE(k::plan_sum(counts(1, 33), 108).per_thread);
  const int64_t fill = 4LL * 108 * k::kThreads;  // outputs that fill every multiprocessor
  EXPECT_TRUE(k::plan_sum(counts(fill, 1024), 108).per_thread);
  EXPECT_FALSE(k::plan_sum(counts(fill, 1025), 108).per_thread);
  EXPECT_FALSE(k::plan_sum(counts(fill - 1, 1024), 108).per_thread);
  EXPECT_EQ(k::sum_workspace_bytes(counts(fill, 1024), 108), 0u);
}

TEST(SumPlan, FewLongSumsAreSplitIntoEvenChunksOfAtLeast2048Terms) {
  // A full sum of 10^6 terms on 108 SMs: 432 blocks wanted, 489 affordable.
  const k::SumPlan full = k::plan_sum(counts(1, 1000000), 108);
  EXPECT_FALSE(full.per_thread);
  EXPECT_EQ(full.splits, 432);
  EXPECT_EQ(full.chunk, (1000000 + 431) / 432);
  EXPECT_EQ(k::sum_workspace_bytes(counts(1, 1000000), 108), 432 * sizeof(double));
  // Batch-norm style: 16 channels of 4096 terms need no split beyond 2 per output.
  const k::SumPlan channels = k::plan_sum(counts(16, 4096), 108);
  EXPECT_EQ(channels.splits, 2);
  EXPECT_EQ(channels.chunk, 2048);
  // Enough outputs to fill the GPU: one block each, no workspace.
  const k::SumPlan wide = k::plan_sum(counts(1000, 5000), 108);
  EXPECT_EQ(wide.splits, 1);
  EXPECT_EQ(wide.chunk, 5000);
  EXPECT_EQ(k::sum_workspace_bytes(counts(1000, 5000), 108), 0u);
  // Never more than kMaxSplits, however many SMs.
  EXPECT_EQ(k::plan_sum(counts(1, int64_t{1} << 32), 100000).splits, k::kMaxSplits);
  EXPECT_EQ(k::sum_workspace_bytes(counts(0, 100000), 108), 0u);
}

TEST(SumPlan, EverySplitIsNonEmptyAndTheSplitsCoverEveryTerm) {
  std::mt19937_64 random(43);
  for (int round = 0; round < 20000; ++round) {
    const int64_t outputs = random_int(random, 1, round % 2 == 0 ? 64 : 100000);
    const int64_t terms = random_int(random, 1, round % 3 == 0 ? 5000 : 50000000);
    const int sm_count = static_cast<int>(random_int(random, 1, 200));
    const k::SumPlan plan = k::plan_sum(counts(outputs, terms), sm_count);
    const std::string what = std::to_string(outputs) + " sums of " + std::to_string(terms) +
                             " on " + std::to_string(sm_count) + " SMs";
    if (plan.per_thread) {
      ASSERT_LE(terms, 1024) << what;
      continue;
    }
    ASSERT_GE(plan.splits, 1) << what;
    ASSERT_LE(plan.splits, k::kMaxSplits) << what;
    ASSERT_GE(plan.chunk * plan.splits, terms) << what;        // every term in some split
    ASSERT_LT(plan.chunk * (plan.splits - 1), terms) << what;  // the last split is not empty
    if (plan.splits > 1) {
      ASSERT_GE(plan.chunk, k::kMinTermsPerBlock / 2) << what;
    }
    const size_t bytes = k::sum_workspace_bytes(counts(outputs, terms), sm_count);
    ASSERT_EQ(bytes, plan.splits > 1 ? outputs * plan.splits * sizeof(double) : 0) << what;
  }
}

TEST(ReduceLayout, MergesNeighboursOfTheSameKindAndDropsSizeOne) {
  // (2, 3, 1, 4, 5) summed over {1, 3}: kept 2 | reduced 3 | (1 dropped) | reduced 4 merged |
  // kept 5.
  const k::ReduceLayout layout = k::reduce_layout({2, 3, 1, 4, 5}, {1, 3});
  EXPECT_EQ(layout.outputs, 10);
  EXPECT_EQ(layout.reduce_count, 12);
  ASSERT_EQ(layout.kept.rank, 2);
  EXPECT_EQ(layout.kept.size[0], 2);
  EXPECT_EQ(layout.kept.stride[0], 60);
  EXPECT_EQ(layout.kept.size[1], 5);
  EXPECT_EQ(layout.kept.stride[1], 1);
  ASSERT_EQ(layout.reduced.rank, 1);
  EXPECT_EQ(layout.reduced.size[0], 12);
  EXPECT_EQ(layout.reduced.stride[0], 5);
}

TEST(ReduceLayout, FullAndEmptyReductions) {
  const k::ReduceLayout all = k::reduce_layout({3, 4, 5}, {0, 1, 2});
  EXPECT_EQ(all.kept.rank, 0);
  EXPECT_EQ(all.outputs, 1);
  EXPECT_EQ(all.reduce_count, 60);
  EXPECT_EQ(all.reduced.rank, 1);
  const k::ReduceLayout none = k::reduce_layout({3, 4, 5}, {});
  EXPECT_EQ(none.reduced.rank, 0);
  EXPECT_EQ(none.reduce_count, 1);
  EXPECT_EQ(none.outputs, 60);
  const k::ReduceLayout ones = k::reduce_layout({1, 1}, {0});
  EXPECT_EQ(ones.outputs, 1);
  EXPECT_EQ(ones.reduce_count, 1);
}

TEST(ReduceLayout, TooManyAlternatingDimsIsAClearError) {
  const Shape shape(18, 2);  // kept and reduced alternate 9 times each
  std::vector<int64_t> dims;
  for (int64_t d = 1; d < 18; d += 2) dims.push_back(d);
  const std::string message = error_message([&] { k::reduce_layout(shape, dims); });
  EXPECT_NE(message.find("[sum] more than 8 alternating kept and reduced dims"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace tandem::testing
