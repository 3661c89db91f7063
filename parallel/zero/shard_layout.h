#pragma once
/// ShardLayout: how sharded data parallel (ZeRO, parallel/zero/sharded_sgd.h) splits a model's
/// parameters, their gradients and their optimizer state across the ranks. Arithmetic only: no
/// tensors, no process group.
///
/// Note [Shards per bucket]: the parameters are laid out bucket by bucket, in the Reducer's
/// buckets (Note [Bucket ordering] in reducer.h), each bucket's parameters back to back in their
/// memory order, as the bucket's flat gradient buffer holds them. Each bucket is padded with
/// zeros to a multiple of the world size and split into world-size equal parts: rank r owns
/// elements [r·s, (r+1)·s) of every bucket, s = padded / world. So
/// - a bucket's gradients reduce-scatter straight into every rank's part of it, bucket by bucket
///   as backward fills them (ZeRO stage 2), and its parameters all-gather straight back into the
///   bucket's flat buffer (allgather_into_tensor, in place);
/// - the shards are balanced by bytes, to within world − 1 elements of padding per bucket,
///   whatever the sizes of the parameters: a part may begin or end inside a parameter, whose
///   elements then live on two (or more) ranks.
/// This is FSDP's flat parameter (padded to a multiple of the world size, split evenly) with
/// one flat parameter per DDP bucket; PyTorch's ZeroRedundancyOptimizer gives whole parameters
/// to ranks instead (greedily by size), which leaves a ResNet's shards uneven (one 2.4M-element
/// convolution weight outweighs a hundred batch-norm vectors) and cannot reduce-scatter a bucket.
///
/// A rank's part of a bucket is a list of segments, one per parameter it touches, each a range of
/// that parameter's elements (in the parameter's memory order) and its place in the part. The
/// optimizer steps a segment as it would the whole parameter: SGD is elementwise, so a sharded
/// step gives each element what the unsharded one gives it.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tandem::parallel {

/// A range of one parameter's elements inside a rank's part of a bucket.
struct ShardSegment {
  size_t parameter = 0;          ///< index into the parameter list
  int64_t parameter_offset = 0;  ///< its first element within the parameter, in memory order
  int64_t shard_offset = 0;      ///< where that element sits within the rank's part
  int64_t length = 0;            ///< elements
};

struct BucketShards {
  std::vector<size_t> parameters;  ///< indices into the parameter list, in bucket order
  std::vector<int64_t> offsets;    ///< each parameter's first element in the bucket's flat buffer
  int64_t numel = 0;               ///< the parameters' elements
  int64_t padded_numel = 0;        ///< numel rounded up to a multiple of the world size
  int64_t shard_numel = 0;         ///< padded_numel / world: every rank's part
  int64_t shard_begin = 0;         ///< this rank's part starts here in the flat buffer
  std::vector<ShardSegment> segments;  ///< this rank's part, in order; no padding
};

class ShardLayout {
 public:
  /// buckets: parameter indices per bucket (every parameter once); numels: elements per
  /// parameter; this rank's parts (segments) are worked out for `rank` of `world`.
  ShardLayout(const std::vector<std::vector<size_t>>& buckets, const std::vector<int64_t>& numels,
              int world, int rank);

  int world() const { return world_; }
  int rank() const { return rank_; }
  const std::vector<BucketShards>& buckets() const { return buckets_; }
  size_t parameter_count() const { return bucket_of_.size(); }
  /// The bucket that holds parameter `index`, and where in its flat buffer.
  size_t bucket_of(size_t index) const { return bucket_of_.at(index); }
  int64_t offset_of(size_t index) const { return offset_of_.at(index); }
  /// Elements of this rank's parts over every bucket (what its optimizer state holds).
  int64_t shard_numel() const;
  /// Elements of every flat buffer, padding included.
  int64_t padded_numel() const;

 private:
  int world_ = 1;
  int rank_ = 0;
  std::vector<BucketShards> buckets_;
  std::vector<size_t> bucket_of_;
  std::vector<int64_t> offset_of_;
};

}  // namespace tandem::parallel
