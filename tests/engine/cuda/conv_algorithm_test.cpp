// The cuDNN algorithm choice (Note [Convolution algorithm choice]) on hand-made perf results:
// the status, TF32 and workspace filters, determinism, the fallbacks and the out-of-memory walk.

#include "engine/cuda/conv_algorithm.h"

#include <gtest/gtest.h>

#include "tests/support/error_message.h"

namespace tandem::cuda {
namespace {

using testing::contains;
using testing::error_message;

constexpr int kFma = 3;       // CUDNN_FMA_MATH's value; the planner only passes it through
constexpr int kTensorOp = 1;  // CUDNN_TENSOR_OP_MATH
constexpr size_t kMiB = size_t{1} << 20;

ConvAlgoPerf perf(int algo, size_t workspace = 0, bool fma = true, bool deterministic = true,
                  bool succeeded = true) {
  return {algo, succeeded, workspace, fma ? kFma : kTensorOp, fma, deterministic};
}

ConvAlgoOptions options(bool allow_tf32 = false, bool deterministic = false) {
  ConvAlgoOptions o;
  o.allow_tf32 = allow_tf32;
  o.deterministic = deterministic;
  o.max_workspace = 64 * kMiB;
  o.fallback = {0, 0, kFma};                   // e.g. BWD_DATA_ALGO_0: atomics
  o.deterministic_fallback = {1, kMiB, kFma};  // BWD_DATA_ALGO_1
  return o;
}

std::vector<int> algos(const std::vector<ConvAlgoChoice>& choices) {
  std::vector<int> out;
  for (const ConvAlgoChoice& c : choices) out.push_back(c.algo);
  return out;
}

TEST(ConvAlgorithm, TakesTheFirstResultThatSucceeded) {
  const std::vector<ConvAlgoPerf> results = {perf(5, 0, true, true, false), perf(4, kMiB)};
  EXPECT_EQ(pick_algorithm(results.data(), 2, options()), (ConvAlgoChoice{4, kMiB, kFma}));
}

TEST(ConvAlgorithm, SkipsTensorOpMathUnlessTf32IsAllowed) {
  const std::vector<ConvAlgoPerf> results = {perf(6, 0, false), perf(2)};
  EXPECT_EQ(pick_algorithm(results.data(), 2, options(false)).algo, 2);
  const ConvAlgoChoice tf32 = pick_algorithm(results.data(), 2, options(true));
  EXPECT_EQ(tf32.algo, 6);
  EXPECT_EQ(tf32.math, kTensorOp);  // the math type it was timed with runs it
}

TEST(ConvAlgorithm, SkipsWorkspacesOverTheCap) {
  const std::vector<ConvAlgoPerf> results = {perf(7, 65 * kMiB), perf(3, 64 * kMiB)};
  EXPECT_EQ(pick_algorithm(results.data(), 2, options()).algo, 3);
}

TEST(ConvAlgorithm, FallsBackWhenNothingQualifies) {
  const std::vector<ConvAlgoPerf> results = {perf(5, 0, true, true, false), perf(6, 0, false)};
  EXPECT_EQ(pick_algorithm(results.data(), 2, options()), (ConvAlgoChoice{0, 0, kFma}));
  EXPECT_EQ(pick_algorithm(nullptr, 0, options()), (ConvAlgoChoice{0, 0, kFma}));
}

TEST(ConvAlgorithm, DeterministicSkipsNonDeterministicResultsAndFallback) {
  const std::vector<ConvAlgoPerf> results = {perf(0, 0, true, false), perf(3, kMiB, true, true)};
  EXPECT_EQ(pick_algorithm(results.data(), 2, options(false, false)).algo, 0);
  EXPECT_EQ(pick_algorithm(results.data(), 2, options(false, true)).algo, 3);
  // Only non-deterministic results: the deterministic fallback (BWD_*_ALGO_1), not ALGO_0.
  EXPECT_EQ(pick_algorithm(results.data(), 1, options(false, true)),
            (ConvAlgoChoice{1, kMiB, kFma}));
  EXPECT_EQ(algos(rank_algorithms(results.data(), 1, options(false, true))), (std::vector{1}));
}

TEST(ConvAlgorithm, RanksInCudnnOrderWithoutRepeatsThenTheFallback) {
  const std::vector<ConvAlgoPerf> results = {perf(4, 2 * kMiB), perf(6, 0, false), perf(4, 0),
                                             perf(2, kMiB)};
  EXPECT_EQ(algos(rank_algorithms(results.data(), 4, options())), (std::vector{4, 2, 0}));
  // The fallback is not listed twice when cuDNN already ranked it.
  const std::vector<ConvAlgoPerf> with_fallback = {perf(0, 0), perf(2, kMiB)};
  EXPECT_EQ(algos(rank_algorithms(with_fallback.data(), 2, options())), (std::vector{0, 2}));
}

TEST(ConvAlgorithm, OutOfMemoryMovesToTheNextAlgorithm) {
  const std::vector<ConvAlgoChoice> ranked = {{4, 8 * kMiB, kFma}, {2, kMiB, kFma}, {0, 0, kFma}};
  std::vector<size_t> tried;
  const auto allocate_up_to = [&](size_t limit) {
    return [&tried, limit](size_t bytes) {
      tried.push_back(bytes);
      TANDEM_CHECK(bytes <= limit, "[cuda allocator] out of memory");
    };
  };
  EXPECT_EQ(first_that_fits(ranked, allocate_up_to(16 * kMiB)), 0u);
  EXPECT_EQ(tried, (std::vector<size_t>{8 * kMiB}));
  tried.clear();
  EXPECT_EQ(first_that_fits(ranked, allocate_up_to(2 * kMiB)), 1u);
  EXPECT_EQ(tried, (std::vector<size_t>{8 * kMiB, kMiB}));
  tried.clear();
  EXPECT_EQ(first_that_fits(ranked, allocate_up_to(0)), 2u);  // the zero-workspace fallback
}

// Note [Workspace without emptying the cache]: the first candidate the cache can give wins over a
// better one that would need the cache emptied; only when none fits so may the cache be emptied.
TEST(ConvAlgorithm, ALeanerWorkspaceFromTheCacheBeatsEmptyingIt) {
  const std::vector<ConvAlgoChoice> ranked = {{4, 8 * kMiB, kFma}, {2, kMiB, kFma}, {0, 0, kFma}};
  std::vector<size_t> tried, emptying;
  const auto cache_holds = [&](size_t limit) {
    return [&tried, limit](size_t bytes) {
      tried.push_back(bytes);
      return bytes <= limit;
    };
  };
  const auto fit_after_emptying = [&](size_t bytes) { emptying.push_back(bytes); };
  EXPECT_EQ(first_that_fits(ranked, cache_holds(2 * kMiB), fit_after_emptying), 1u);
  EXPECT_EQ(tried, (std::vector<size_t>{8 * kMiB, kMiB}));
  EXPECT_TRUE(emptying.empty());
  tried.clear();
  // Nothing in the cache (not even the zero workspace, say): the cache may be emptied, best first.
  EXPECT_EQ(first_that_fits(
                ranked, [](size_t) { return false; }, fit_after_emptying),
            0u);
  EXPECT_EQ(emptying, (std::vector<size_t>{8 * kMiB}));
}

TEST(ConvAlgorithm, OutOfMemoryForEveryAlgorithmIsTheLastError) {
  const std::vector<ConvAlgoChoice> ranked = {{4, 8 * kMiB, kFma}, {1, kMiB, kFma}};
  int calls = 0;
  const std::string message = error_message([&] {
    first_that_fits(ranked, [&](size_t bytes) {
      ++calls;
      TANDEM_FAIL("[cuda allocator] out of memory allocating ", bytes);
    });
  });
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(contains(message, "[cuda allocator] out of memory allocating 1048576")) << message;
  EXPECT_TRUE(contains(error_message([] { first_that_fits({}, [](size_t) {}); }),
                       "[conv2d] no algorithm to try"));
}

TEST(ConvAlgorithm, EnvironmentFlags) {
  EXPECT_FALSE(environment_flag(nullptr));
  EXPECT_FALSE(environment_flag(""));
  EXPECT_FALSE(environment_flag("0"));
  EXPECT_TRUE(environment_flag("1"));
  EXPECT_TRUE(environment_flag("yes"));
}

}  // namespace
}  // namespace tandem::cuda
