#include "parallel/zero/shard_layout.h"

#include <algorithm>
#include <limits>

#include "engine/error.h"

namespace tandem::parallel {
namespace {

constexpr size_t kNowhere = std::numeric_limits<size_t>::max();

// This rank's part [begin, end) of a bucket, cut at its parameters' boundaries.
std::vector<ShardSegment> segments_of(const BucketShards& bucket,
                                      const std::vector<int64_t>& numels, int64_t begin,
                                      int64_t end) {
  std::vector<ShardSegment> segments;
  for (size_t slot = 0; slot < bucket.parameters.size(); ++slot) {
    const size_t parameter = bucket.parameters[slot];
    const int64_t first = bucket.offsets[slot];
    const int64_t last = first + numels[parameter];
    const int64_t from = std::max(first, begin);
    const int64_t to = std::min(last, end);
    if (from >= to) continue;
    segments.push_back({.parameter = parameter,
                        .parameter_offset = from - first,
                        .shard_offset = from - begin,
                        .length = to - from});
  }
  return segments;
}

}  // namespace

// Note [Shards per bucket]
ShardLayout::ShardLayout(const std::vector<std::vector<size_t>>& buckets,
                         const std::vector<int64_t>& numels, int world, int rank)
    : world_(world), rank_(rank), bucket_of_(numels.size(), kNowhere), offset_of_(numels.size()) {
  TANDEM_CHECK(world >= 1 && rank >= 0 && rank < world, "[ZeRO] rank ", rank,
               " is out of range for world size ", world);
  for (const std::vector<size_t>& members : buckets) {
    BucketShards bucket;
    bucket.parameters = members;
    for (size_t index : members) {
      TANDEM_CHECK(index < numels.size() && bucket_of_[index] == kNowhere, "[ZeRO] parameter ",
                   index, " is in no bucket or in two");
      bucket_of_[index] = buckets_.size();
      offset_of_[index] = bucket.numel;
      bucket.offsets.push_back(bucket.numel);
      bucket.numel += numels[index];
    }
    bucket.padded_numel = (bucket.numel + world - 1) / world * world;
    bucket.shard_numel = bucket.padded_numel / world;
    bucket.shard_begin = rank * bucket.shard_numel;
    bucket.segments =
        segments_of(bucket, numels, bucket.shard_begin, bucket.shard_begin + bucket.shard_numel);
    buckets_.push_back(std::move(bucket));
  }
  for (size_t i = 0; i < bucket_of_.size(); ++i) {
    TANDEM_CHECK(bucket_of_[i] != kNowhere, "[ZeRO] parameter ", i, " is in no bucket");
  }
}

int64_t ShardLayout::shard_numel() const {
  int64_t total = 0;
  for (const BucketShards& bucket : buckets_) total += bucket.shard_numel;
  return total;
}

int64_t ShardLayout::padded_numel() const {
  int64_t total = 0;
  for (const BucketShards& bucket : buckets_) total += bucket.padded_numel;
  return total;
}

}  // namespace tandem::parallel
