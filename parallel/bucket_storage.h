#pragma once
/// BucketStorage: where the Reducer's gradient buckets live and how each one is reduced. The
/// Reducer (reducer.h) decides which parameters share a bucket, copies their gradients in as
/// backward produces them and launches the buckets' reductions in order while backward runs; it
/// asks its BucketStorage for each bucket's buffer and to start its reduction:
///
///   build(numels, device)   the Reducer (re)built its buckets: bucket k holds numels[k] elements
///   buffer(k)               bucket k's first gradient of the step arrived: its buffer
///   reduce(hook, group, b)  bucket b.index is full and its turn has come: start its reduction
///   end_step()              every bucket's reduction has been waited for (finalize(), or a
///                           joined rank's shadow_backward())
///   reduced(k)              what the last step left: read by an optimizer that steps from the
///                           buckets (parallel/zero/sharded_sgd.h)
///
/// DenseBuckets (below) keeps one buffer per bucket for the whole run and all-reduces it: plain
/// DDP and ZeRO stage 1. ShardedBuckets (parallel/zero/sharded_buckets.h, ZeRO stage 2)
/// allocates a bucket's buffer per step, reduce-scatters it and keeps only this rank's part.
/// The Reducer calls in with its lock held; the readers (reduced(), memory(), has_reduced())
/// come from the training thread, so a storage guards its own state.

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"
#include "parallel/comm/process_group.h"
#include "parallel/comm_hook.h"

namespace tandem::parallel {

/// The gradient memory a Reducer's buckets hold, in bytes (Note [Counted memory] in
/// parallel/zero/sharded_sgd.h).
struct GradientMemory {
  size_t kept_bytes = 0;            ///< kept between steps: the buckets, or the shards (stage 2)
  size_t peak_transient_bytes = 0;  ///< stage 2: most bucket bytes alive at once, so far
};

class BucketStorage {
 public:
  virtual ~BucketStorage() = default;

  /// Buffers for buckets of numels[k] gradient elements, on `device`, replacing any before
  /// (the Reducer rebuilt its buckets).
  virtual void build(const std::vector<int64_t>& numels, Device device) = 0;
  /// True: a bucket's buffer is kept from step to step and the reduced gradients go back into
  /// the parameters' .grad (DenseBuckets). False: a buffer lives for one step, until its
  /// reduction is launched; each .grad is dropped once copied into its bucket, and the reduced
  /// gradients live only here (ShardedBuckets).
  virtual bool keeps_gradients() const = 0;
  /// Bucket k's buffer for this step, zero-filled when new: its gradients back to back, then
  /// padding up to numel(k).
  virtual Tensor buffer(size_t k) = 0;
  /// Elements of bucket k's buffer, padding included.
  virtual int64_t numel(size_t k) const = 0;
  /// Starts reducing `bucket` (its buffer as buffer() gave it, every rank's part already scaled
  /// for the average) over `group` through `hook`. Null when the hook returned no Work.
  virtual std::shared_ptr<Work> reduce(CommHook& hook, ProcessGroup& group,
                                       const GradBucket& bucket) = 0;
  /// Every bucket's reduction of this step has been waited for.
  virtual void end_step() = 0;

  /// Bucket k's reduced gradients as the last step left them: the whole bucket, or this rank's
  /// part of it (ShardedBuckets).
  virtual Tensor reduced(size_t k) const = 0;
  virtual GradientMemory memory() const = 0;
  /// A step has reduced gradients since the last clear_reduced().
  bool has_reduced() const { return reduced_; }
  /// The reduced gradients were consumed (the sharded optimizer's zero_grad()), or are none of
  /// this rank's (a joined rank's shadowed step): the next step's replace them.
  void clear_reduced() { reduced_ = false; }

 protected:
  std::atomic<bool> reduced_ = false;
};

/// Plain DDP's buckets: one flat buffer each, kept for the run, all-reduced in place.
class DenseBuckets final : public BucketStorage {
 public:
  void build(const std::vector<int64_t>& numels, Device device) override;
  bool keeps_gradients() const override { return true; }
  Tensor buffer(size_t k) override;
  int64_t numel(size_t k) const override;
  std::shared_ptr<Work> reduce(CommHook& hook, ProcessGroup& group,
                               const GradBucket& bucket) override;
  void end_step() override { reduced_ = true; }
  Tensor reduced(size_t k) const override;
  GradientMemory memory() const override;

 private:
  mutable std::mutex mutex_;
  std::vector<Tensor> buffers_;
};

}  // namespace tandem::parallel
