// The Reducer's part in sharded data parallel (ZeRO stage 2, parallel/zero/sharded_sgd.h): stage
// 2's transient bucket buffers and what they cost.
//
// Note [Sharded gradients] (ReducerOptions::shard_gradients): the buckets keep their order from
// construction (rebuild_buckets off: the shards are laid out by them, Note [Shards per bucket] in
// shard_layout.h), and what a bucket keeps between steps is only `shard`, this rank's part of its
// reduced gradients (1/world of it, padding included). Its flat buffer, padded to a multiple of the
// world size, is allocated when the bucket's first gradient of the step arrives, filled as DDP's
// are, handed to the hook's reduce_scatter() (Note [Sharded reductions] in comm_hook.h) and dropped
// at once: the process group holds it until the collective has run (NCCL: record_stream), then it
// is freed. Each parameter's .grad is dropped as soon as it has been copied into its bucket, so
// after the step a rank holds no gradient but its shard. The overlap with backward is DDP's:
// buckets launch as they fill, in order (Note [Launch order]), and the timer times them alike.
// Under no_sync() .grad accumulates full-size as in DDP (as under FSDP's no_sync()); a synchronised
// backward whose shard was not consumed (clear_reduced_gradients()) adds the new shard to it, as
// .grad adds up. gradient_memory() counts the bytes: the shards, and the most bucket bytes alive at
// once (a bucket counts from its allocation until this Reducer sees its collective completed, an
// upper bound of when the group frees it).

#include <algorithm>

#include "engine/autograd/grad_mode.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/factory.h"
#include "parallel/reducer.h"

namespace tandem::parallel {

void Reducer::check_sharding_options() const {
  if (!options_.shard_gradients) return;
  TANDEM_CHECK(!options_.rebuild_buckets,
               "[DDP] sharded gradients need the buckets fixed (rebuild_buckets = false): the "
               "shards are laid out by them");
  TANDEM_CHECK(!options_.find_unused_parameters,
               "[DDP] find_unused_parameters is not supported with sharded gradients (ZeRO stage "
               "2): every parameter must get a gradient in every step");
  TANDEM_CHECK(!options_.gradient_as_bucket_view,
               "[DDP] gradient_as_bucket_view has no meaning with sharded gradients (ZeRO stage "
               "2): a bucket lives only until its reduce-scatter, and .grad is dropped");
}

Tensor Reducer::reduced_gradients(size_t bucket) const {
  std::lock_guard lock(mutex_);
  const Bucket& b = buckets_.at(bucket);
  return options_.shard_gradients ? b.shard : b.flat;
}

bool Reducer::has_reduced_gradients() const {
  std::lock_guard lock(mutex_);
  return reduced_;
}

void Reducer::clear_reduced_gradients() {
  std::lock_guard lock(mutex_);
  reduced_ = false;
}

GradientMemory Reducer::gradient_memory() const {
  std::lock_guard lock(mutex_);
  GradientMemory memory;
  for (const Bucket& bucket : buckets_) {
    memory.kept_bytes += options_.shard_gradients ? bucket.shard.nbytes() : bucket.flat.nbytes();
  }
  memory.peak_transient_bytes = peak_transient_bytes_;
  return memory;
}

// A bucket's flat buffer for this step, zero-filled (the padding must add nothing). Runs on the
// thread whose gradient arrived first in the bucket, on its current stream, where the copies
// into it go next.
void Reducer::allocate_flat(Bucket& bucket) {
  NoGradGuard no_grad;
  retire_completed();
  bucket.flat = zeros({bucket.numel}, {.device = device_});
  make_views(bucket);
  transient_bytes_ += bucket.flat.nbytes();
  peak_transient_bytes_ = std::max(peak_transient_bytes_, transient_bytes_);
}

// The collective holds the buffer from here on; it counts until the collective has been seen
// done.
void Reducer::release_flat(Bucket& bucket) {
  in_flight_.emplace_back(bucket.work, bucket.flat.nbytes());
  bucket.flat = Tensor();
  bucket.views.clear();
}

void Reducer::retire_completed() {
  std::erase_if(in_flight_, [this](const std::pair<std::shared_ptr<Work>, size_t>& entry) {
    if (!entry.first->completed()) return false;
    transient_bytes_ -= entry.second;
    return true;
  });
}

// After wait_for_buckets(): the gradients reduced on top of an unconsumed shard join it.
void Reducer::add_incoming_shards() {
  NoGradGuard no_grad;
  for (Bucket& bucket : buckets_) {
    if (!bucket.incoming.defined()) continue;
    add_(bucket.shard, bucket.incoming);
    bucket.incoming = Tensor();
  }
}

}  // namespace tandem::parallel
