// ShardLayout (parallel/zero/shard_layout.h): Note [Shards per bucket]'s arithmetic, without
// processes.
#include "parallel/zero/shard_layout.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/support/error_message.h"

namespace tandem::parallel {
namespace {

using testing::error_message;

// Parameter sizes with a large one beside small ones, as a ResNet's convolution and batch norm.
const std::vector<int64_t> kNumels = {10, 80, 8, 8, 576, 8, 8, 216};
const std::vector<std::vector<size_t>> kBuckets = {{0, 1, 2, 3}, {4}, {5, 6, 7}};

TEST(ShardLayout, EveryElementBelongsToExactlyOneRankAndThePartsAreEqual) {
  for (const int world : {1, 2, 3, 4, 7}) {
    std::vector<std::vector<int>> owners(kNumels.size());
    for (size_t i = 0; i < kNumels.size(); ++i) owners[i].assign(kNumels[i], 0);
    for (int rank = 0; rank < world; ++rank) {
      const ShardLayout layout(kBuckets, kNumels, world, rank);
      int64_t padded = 0;
      for (const BucketShards& bucket : layout.buckets()) {
        EXPECT_EQ(bucket.padded_numel % world, 0);
        EXPECT_LT(bucket.padded_numel - bucket.numel, world) << "padding below the world size";
        EXPECT_EQ(bucket.shard_numel * world, bucket.padded_numel);
        EXPECT_EQ(bucket.shard_begin, rank * bucket.shard_numel);
        padded += bucket.padded_numel;
        int64_t at = -1;
        for (const ShardSegment& s : bucket.segments) {
          EXPECT_GT(s.shard_offset, at) << "segments in order";
          at = s.shard_offset;
          EXPECT_LE(s.shard_offset + s.length, bucket.shard_numel);
          // The segment's place in the flat buffer is the parameter's offset plus its start.
          EXPECT_EQ(bucket.shard_begin + s.shard_offset,
                    layout.offset_of(s.parameter) + s.parameter_offset);
          for (int64_t e = 0; e < s.length; ++e) ++owners[s.parameter][s.parameter_offset + e];
        }
      }
      EXPECT_EQ(layout.padded_numel(), padded);
      EXPECT_EQ(layout.shard_numel() * world, padded) << "balanced to the element";
    }
    for (size_t i = 0; i < kNumels.size(); ++i) {
      for (const int count : owners[i]) ASSERT_EQ(count, 1) << "parameter " << i << ", " << world;
    }
  }
}

TEST(ShardLayout, ALargeParameterIsSplitAcrossRanks) {
  const ShardLayout rank0(kBuckets, kNumels, 3, 0), rank2(kBuckets, kNumels, 3, 2);
  // Bucket 1 is parameter 4 alone: 576 elements, 192 per rank.
  ASSERT_EQ(rank0.buckets()[1].segments.size(), 1u);
  EXPECT_EQ(rank0.buckets()[1].segments[0].length, 192);
  EXPECT_EQ(rank2.buckets()[1].segments[0].parameter_offset, 384);
  EXPECT_EQ(rank0.bucket_of(7), 2u);
  EXPECT_EQ(rank0.offset_of(7), 16);
}

TEST(ShardLayout, RefusesAParameterInTwoBucketsOrNone) {
  EXPECT_NE(error_message([] {
              ShardLayout({{0, 1}, {1}}, {3, 4}, 2, 0);
            }).find("in two"),
            std::string::npos);
  EXPECT_NE(error_message([] {
              ShardLayout({{0}}, {3, 4}, 2, 0);
            }).find("in no bucket"),
            std::string::npos);
  EXPECT_NE(error_message([] { ShardLayout({{0}}, {3}, 2, 2); }).find("out of range"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::parallel
