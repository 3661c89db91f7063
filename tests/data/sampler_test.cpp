#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "data/data_loader.h"
#include "data/sampler.h"
#include "engine/error.h"

namespace tandem::data {
namespace {

TEST(Sampler, SequentialAndRandom) {
  EXPECT_EQ(SequentialSampler(4).indices(3), (std::vector<int64_t>{0, 1, 2, 3}));
  const RandomSampler sampler(100, 7);
  const auto epoch0 = sampler.indices(0);
  auto sorted = epoch0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, SequentialSampler(100).indices(0));  // a permutation
  EXPECT_EQ(epoch0, RandomSampler(100, 7).indices(0));   // reproducible
  EXPECT_NE(epoch0, sampler.indices(1));                 // reshuffled each epoch
  EXPECT_NE(epoch0, RandomSampler(100, 8).indices(0));   // depends on the seed
}

// Checks PyTorch's DistributedSampler properties for one (n, world, drop_last) case.
void check_partition(int64_t n, int64_t world, bool drop_last, bool shuffle) {
  const int64_t per_rank = drop_last ? n / world : (n + world - 1) / world;
  std::vector<int64_t> all;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    all.clear();
    for (int64_t rank = 0; rank < world; ++rank) {
      const DistributedSampler sampler(n, {.num_replicas = world,
                                           .rank = rank,
                                           .shuffle = shuffle,
                                           .seed = 3,
                                           .drop_last = drop_last});
      const auto mine = sampler.indices(epoch);
      ASSERT_EQ(static_cast<int64_t>(mine.size()), per_rank)
          << n << "/" << world << " rank " << rank;
      ASSERT_EQ(sampler.size(), per_rank);
      all.insert(all.end(), mine.begin(), mine.end());
    }
    const std::set<int64_t> distinct(all.begin(), all.end());
    for (int64_t index : all) ASSERT_TRUE(index >= 0 && index < n);
    if (drop_last) {
      EXPECT_EQ(static_cast<int64_t>(distinct.size()), per_rank * world) << "no index twice";
    } else {
      EXPECT_EQ(static_cast<int64_t>(distinct.size()), n) << "the union covers the data set";
      EXPECT_EQ(static_cast<int64_t>(all.size()) - n, per_rank * world - n)
          << "only padding repeats";
    }
  }
}

TEST(StridedSampler, SplitsWithoutPaddingOrOverlap) {
  for (int64_t world : {1, 2, 3, 4}) {
    std::vector<int> seen(10, 0);
    for (int64_t rank = 0; rank < world; ++rank) {
      const StridedSampler sampler(10, world, rank);
      const auto mine = sampler.indices(3);
      EXPECT_EQ(static_cast<int64_t>(mine.size()), sampler.size());
      for (int64_t i : mine) ++seen[static_cast<size_t>(i)];
    }
    EXPECT_EQ(seen, std::vector<int>(10, 1)) << "world " << world;
  }
  EXPECT_EQ(StridedSampler(10, 3, 1).indices(0), (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(StridedSampler(2, 4, 3).size(), 0);
  EXPECT_THROW(StridedSampler(10, 2, 2), Error);
}

TEST(DistributedSampler, PartitionsForSeveralWorldSizes) {
  for (int64_t world : {1, 2, 3, 4, 8}) {
    for (int64_t n : {8, 10, 13, 50}) {
      for (bool drop_last : {false, true}) {
        check_partition(n, world, drop_last, true);
        check_partition(n, world, drop_last, false);
      }
    }
  }
}

TEST(DistributedSampler, MatchesPyTorchWithoutShuffle) {
  // torch: DistributedSampler(range(10), num_replicas=4, rank=r, shuffle=False) → padded to 12.
  const auto rank = [](int64_t r, bool drop) {
    return DistributedSampler(10,
                              {.num_replicas = 4, .rank = r, .shuffle = false, .drop_last = drop})
        .indices(0);
  };
  EXPECT_EQ(rank(0, false), (std::vector<int64_t>{0, 4, 8}));
  EXPECT_EQ(rank(1, false), (std::vector<int64_t>{1, 5, 9}));
  EXPECT_EQ(rank(2, false), (std::vector<int64_t>{2, 6, 0}));
  EXPECT_EQ(rank(3, false), (std::vector<int64_t>{3, 7, 1}));
  EXPECT_EQ(rank(3, true), (std::vector<int64_t>{3, 7}));
}

TEST(DistributedSampler, RanksAgreeOnTheEpochsShuffle) {
  const DistributedSampler r0(20, {.num_replicas = 2, .rank = 0, .seed = 5});
  const DistributedSampler r1(20, {.num_replicas = 2, .rank = 1, .seed = 5});
  EXPECT_NE(r0.indices(0), r0.indices(1));
  std::set<int64_t> epoch1;
  for (int64_t i : r0.indices(1)) epoch1.insert(i);
  for (int64_t i : r1.indices(1)) epoch1.insert(i);
  EXPECT_EQ(epoch1.size(), 20u);
}

// For Join: without padding the shares of 11 over 3 ranks are 4, 4 and 3 indices, together
// every index exactly once.
TEST(DistributedSampler, UnpaddedSharesCoverTheDataOnce) {
  std::vector<int64_t> all;
  std::vector<int64_t> sizes;
  for (int64_t rank = 0; rank < 3; ++rank) {
    const DistributedSampler sampler(11,
                                     {.num_replicas = 3, .rank = rank, .seed = 2, .pad = false});
    const std::vector<int64_t> mine = sampler.indices(4);
    EXPECT_EQ(static_cast<int64_t>(mine.size()), sampler.size());
    sizes.push_back(sampler.size());
    all.insert(all.end(), mine.begin(), mine.end());
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 3}));
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(11);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(all, expected);
}

// The images of each global step when `global_batch` is split over `world` ranks: rank r's
// batch s of global_batch / world indices (the loader's batches) is its part of global step s.
std::vector<std::multiset<int64_t>> global_steps(int64_t n, int64_t world, int64_t global_batch,
                                                 bool drop_last, bool pad, int64_t epoch) {
  std::vector<std::multiset<int64_t>> steps;
  const int64_t local = global_batch / world;
  for (int64_t rank = 0; rank < world; ++rank) {
    const DistributedSampler sampler(
        n, {.num_replicas = world, .rank = rank, .seed = 9, .drop_last = drop_last, .pad = pad});
    const std::vector<int64_t> mine = sampler.indices(epoch);
    const int64_t batches = batch_count(sampler.size(), local, drop_last);
    if (static_cast<int64_t>(steps.size()) < batches) steps.resize(static_cast<size_t>(batches));
    for (int64_t i = 0; i < batches * local && i < sampler.size(); ++i) {
      steps[static_cast<size_t>(i / local)].insert(mine[static_cast<size_t>(i)]);
    }
  }
  return steps;
}

// Note [Global batches at any world size]: an elastic resume relies on it. Data set sizes that
// divide by every world size and ones that do not; a global batch of 12 splits over 1–4 ranks.
TEST(DistributedSampler, AGlobalStepHoldsTheSameImagesAtAnyWorldSize) {
  for (const int64_t n : {96, 100, 101, 119, 13}) {
    for (const bool drop_last : {false, true}) {
      const auto one_rank = global_steps(n, 1, 12, drop_last, /*pad=*/false, 3);
      ASSERT_EQ(one_rank.size(), static_cast<size_t>(drop_last ? n / 12 : (n + 11) / 12));
      for (const int64_t world : {2, 3, 4}) {
        EXPECT_EQ(global_steps(n, world, 12, drop_last, false, 3), one_rank)
            << n << " images over " << world << " ranks" << (drop_last ? ", drop_last" : "");
      }
    }
    // Padded shares (SyncBatchNorm, --accumulate): the same steps but the last, which holds the
    // padding that the world size decides.
    auto one_rank = global_steps(n, 1, 12, false, /*pad=*/true, 3);
    one_rank.pop_back();
    for (const int64_t world : {2, 3, 4}) {
      auto steps = global_steps(n, world, 12, false, true, 3);
      ASSERT_EQ(steps.size(), one_rank.size() + 1) << n << " images over " << world;
      steps.pop_back();
      EXPECT_EQ(steps, one_rank) << n << " images over " << world << " ranks, padded";
    }
  }
}

TEST(DistributedSampler, BadArguments) {
  EXPECT_THROW(DistributedSampler(10, {.num_replicas = 2, .rank = 2}), Error);
  EXPECT_THROW(DistributedSampler(10, {.num_replicas = 0}), Error);
  EXPECT_THROW(DistributedSampler(3, {.num_replicas = 4, .rank = 0, .drop_last = true}), Error);
  EXPECT_THROW(DistributedSampler(0, {}), Error);
}

}  // namespace
}  // namespace tandem::data
