#include "parallel/zero/sharded_buckets.h"

#include <algorithm>

#include "engine/autograd/grad_mode.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/factory.h"

namespace tandem::parallel {

void ShardedBuckets::build(const std::vector<int64_t>& numels, Device device) {
  NoGradGuard no_grad;
  std::lock_guard lock(mutex_);
  device_ = device;
  shards_.clear();
  for (int64_t numel : numels) {
    Shard shard;
    shard.numel = (numel + world_ - 1) / world_ * world_;
    shard.shard = zeros({shard.numel / world_}, {.device = device});
    shards_.push_back(std::move(shard));
  }
}

Tensor ShardedBuckets::buffer(size_t k) {
  NoGradGuard no_grad;
  std::lock_guard lock(mutex_);
  retire_completed();
  Tensor buffer = zeros({shards_.at(k).numel}, {.device = device_});
  transient_bytes_ += buffer.nbytes();
  peak_transient_bytes_ = std::max(peak_transient_bytes_, transient_bytes_);
  return buffer;
}

int64_t ShardedBuckets::numel(size_t k) const {
  std::lock_guard lock(mutex_);
  return shards_.at(k).numel;
}

std::shared_ptr<Work> ShardedBuckets::reduce(CommHook& hook, ProcessGroup& group,
                                             const GradBucket& bucket) {
  std::lock_guard lock(mutex_);
  Shard& shard = shards_.at(bucket.index);
  // A shard the optimizer has not consumed takes the new one added (end_step()).
  if (reduced_) shard.incoming = zeros_like(shard.shard);
  std::shared_ptr<Work> work =
      hook.reduce_scatter(group, bucket, reduced_ ? shard.incoming : shard.shard);
  if (work != nullptr) in_flight_.emplace_back(work, bucket.buffer.nbytes());
  return work;
}

// After every bucket's reduction was waited for: the gradients reduced on top of an unconsumed
// shard join it.
void ShardedBuckets::end_step() {
  NoGradGuard no_grad;
  std::lock_guard lock(mutex_);
  for (Shard& shard : shards_) {
    if (!shard.incoming.defined()) continue;
    add_(shard.shard, shard.incoming);
    shard.incoming = Tensor();
  }
  retire_completed();
  reduced_ = true;
}

Tensor ShardedBuckets::reduced(size_t k) const {
  std::lock_guard lock(mutex_);
  return shards_.at(k).shard;
}

GradientMemory ShardedBuckets::memory() const {
  std::lock_guard lock(mutex_);
  GradientMemory memory;
  for (const Shard& shard : shards_) memory.kept_bytes += shard.shard.nbytes();
  memory.peak_transient_bytes = peak_transient_bytes_;
  return memory;
}

void ShardedBuckets::retire_completed() {
  std::erase_if(in_flight_, [this](const std::pair<std::shared_ptr<Work>, size_t>& entry) {
    if (!entry.first->completed()) return false;
    transient_bytes_ -= entry.second;
    return true;
  });
}

ReducerOptions sharded_reducer_options(Sharding sharding, ReducerOptions options) {
  if (sharding == Sharding::None) return options;
  // A parameter no rank used keeps its .grad in DDP and plain SGD skips it; the sharded step
  // cannot tell, and would move it by its momentum and weight decay.
  TANDEM_CHECK(!options.find_unused_parameters,
               "[ZeRO] find_unused_parameters is not supported with sharding (",
               sharding_name(sharding), "): every parameter must take part in every step's loss");
  TANDEM_CHECK(sharding != Sharding::Gradients || !options.gradient_as_bucket_view,
               "[ZeRO] gradient_as_bucket_view has no meaning with sharded gradients (ZeRO stage "
               "2): a bucket lives only until its reduce-scatter, and .grad is dropped");
  // Note [Shards per bucket]: the shards follow the buckets, which therefore never change.
  options.rebuild_buckets = false;
  return options;
}

std::shared_ptr<BucketStorage> sharded_bucket_storage(Sharding sharding, int world) {
  if (sharding == Sharding::Gradients) return std::make_shared<ShardedBuckets>(world);
  return std::make_shared<DenseBuckets>();
}

}  // namespace tandem::parallel
