#pragma once
/// ShardedBuckets: the Reducer's bucket storage for ZeRO stage 2 (Sharding::Gradients; Note
/// [Sharded data parallel] in sharded_sgd.h). The Reducer fills and launches its buckets as it
/// does for plain DDP; this storage reduce-scatters each one and keeps this rank's part.
///
/// Note [Sharded gradients]: the buckets keep their order from construction (rebuild_buckets
/// off: the shards are laid out by them, Note [Shards per bucket] in shard_layout.h), and what
/// a bucket keeps between steps is only its shard, this rank's part of its reduced gradients
/// (1/world of it, padding included). Its flat buffer, padded to a multiple of the world size,
/// is allocated when the bucket's first gradient of the step arrives (buffer()), filled by the
/// Reducer, handed to the hook's reduce_scatter() (Note [Sharded reductions] in comm_hook.h)
/// and dropped at once: the process group holds it until the collective has run (NCCL:
/// record_stream), then it is freed. Each parameter's .grad is dropped as soon as it has been
/// copied into its bucket (keeps_gradients() is false), so after the step a rank holds no
/// gradient but its shard. The overlap with backward is DDP's: buckets launch as they fill, in
/// order (Note [Launch order] in reducer.cpp), and the Reducer's timer times them alike. Under
/// no_sync() .grad accumulates full-size as in DDP (as under FSDP's no_sync()); a synchronised
/// backward whose shard was not consumed (clear_reduced()) adds the new shard to it, as .grad
/// adds up. memory() counts the bytes: the shards, and the most bucket bytes alive at once (a
/// bucket counts from its allocation until this storage sees its collective completed, an upper
/// bound of when the group frees it).
///
/// Note [Stage 3 here]: ZeRO stage 3 also shards the parameters, all-gathering a unit's just
/// before its forward and its backward (the next unit prefetched) and freeing them after. It
/// plugs in beside this class, not into the Reducer: its gradients reduce-scatter exactly as
/// stage 2's, so ShardedBuckets serves it unchanged; FlatParameters keeps only the shard
/// between uses and gains gather/free per unit; a unit scheduler (forward pre-hooks, a
/// pre-backward hook, prefetch) drives them; sharded_reducer_options() and
/// sharded_bucket_storage() learn the third stage. The Reducer keeps bucketing, launch order
/// and overlap, and sees only the BucketStorage interface.

#include <memory>
#include <utility>
#include <vector>

#include "parallel/bucket_storage.h"
#include "parallel/reducer.h"
#include "parallel/zero/sharding.h"

namespace tandem::parallel {

class ShardedBuckets final : public BucketStorage {
 public:
  /// Buckets split over `world` ranks (the reduce-scatter gives each rank its part).
  explicit ShardedBuckets(int world) : world_(world) {}

  void build(const std::vector<int64_t>& numels, Device device) override;
  bool keeps_gradients() const override { return false; }
  /// Allocated now, zero-filled (the padding must add nothing), on the calling thread's current
  /// stream, where the Reducer's copies into it go next.
  Tensor buffer(size_t k) override;
  int64_t numel(size_t k) const override;
  /// Reduce-scatters into the bucket's shard (or beside it, when the shard holds an unconsumed
  /// step); the collective holds the buffer from here on.
  std::shared_ptr<Work> reduce(CommHook& hook, ProcessGroup& group,
                               const GradBucket& bucket) override;
  void end_step() override;
  /// This rank's part of bucket k (padding included).
  Tensor reduced(size_t k) const override;
  GradientMemory memory() const override;

 private:
  struct Shard {
    int64_t numel = 0;  ///< of the bucket's buffer, padded to a multiple of the world size
    Tensor shard;       ///< this rank's part of the reduced bucket
    Tensor incoming;    ///< the reduction's target while `shard` holds an unconsumed gradient
  };

  void retire_completed();  ///< buffers whose collective has been seen done stop counting

  int world_;
  Device device_ = Device::cpu();
  mutable std::mutex mutex_;  // guards everything below
  std::vector<Shard> shards_;
  /// Bucket buffers whose collective may still run, and their bytes.
  std::vector<std::pair<std::shared_ptr<Work>, size_t>> in_flight_;
  size_t transient_bytes_ = 0;  ///< bucket bytes alive (allocated, collective not seen done)
  size_t peak_transient_bytes_ = 0;
};

/// The Reducer's options under `sharding`: the buckets fixed (Note [Shards per bucket]), and
/// what sharding cannot do refused in one line each: find_unused_parameters at any stage,
/// gradient_as_bucket_view at stage 2. `options` unchanged without sharding.
ReducerOptions sharded_reducer_options(Sharding sharding, ReducerOptions options);

/// The bucket storage for `sharding` over `world` ranks: ShardedBuckets for stage 2, else
/// DenseBuckets.
std::shared_ptr<BucketStorage> sharded_bucket_storage(Sharding sharding, int world);

}  // namespace tandem::parallel
