#include "parallel/bucket_storage.h"

#include "engine/autograd/grad_mode.h"
#include "engine/ops/factory.h"

namespace tandem::parallel {

void DenseBuckets::build(const std::vector<int64_t>& numels, Device device) {
  NoGradGuard no_grad;
  std::lock_guard lock(mutex_);
  buffers_.clear();
  // On the parameters' device (Note [Reducer on CUDA] in reducer.cpp).
  for (int64_t numel : numels) buffers_.push_back(zeros({numel}, {.device = device}));
}

Tensor DenseBuckets::buffer(size_t k) {
  std::lock_guard lock(mutex_);
  return buffers_.at(k);
}

int64_t DenseBuckets::numel(size_t k) const {
  std::lock_guard lock(mutex_);
  return buffers_.at(k).numel();
}

std::shared_ptr<Work> DenseBuckets::reduce(CommHook& hook, ProcessGroup& group,
                                           const GradBucket& bucket) {
  return hook.reduce(group, bucket);
}

Tensor DenseBuckets::reduced(size_t k) const {
  std::lock_guard lock(mutex_);
  return buffers_.at(k);
}

GradientMemory DenseBuckets::memory() const {
  std::lock_guard lock(mutex_);
  GradientMemory memory;
  for (const Tensor& buffer : buffers_) memory.kept_bytes += buffer.nbytes();
  return memory;
}

}  // namespace tandem::parallel
