// The Reducer's buckets (reducer.h, Note [Bucket ordering]): which parameters share a bucket, the
// flat buffer and its per-parameter views, and the order a checkpoint keeps so that a resumed run
// reduces in the same buckets as the run it continues (Note [Bucket order on resume], above
// bucket_order()).
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/ops/factory.h"
#include "engine/ops/layout.h"
#include "parallel/reducer.h"

namespace tandem::parallel {
namespace {

constexpr double kMegabyte = 1024.0 * 1024.0;

}  // namespace

std::vector<std::vector<size_t>> assign_buckets(const std::vector<size_t>& order,
                                                const std::vector<size_t>& bytes,
                                                size_t first_cap_bytes, size_t cap_bytes) {
  std::vector<std::vector<size_t>> buckets;
  std::vector<size_t> current;
  size_t current_bytes = 0;
  for (size_t index : order) {
    const size_t cap = buckets.empty() ? first_cap_bytes : cap_bytes;
    if (!current.empty() && current_bytes + bytes.at(index) > cap) {
      buckets.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(index);
    current_bytes += bytes[index];
  }
  if (!current.empty()) buckets.push_back(std::move(current));
  return buckets;
}

void Reducer::build_buckets(const std::vector<size_t>& order) {
  NoGradGuard no_grad;
  std::vector<size_t> bytes;
  for (const Tensor& p : parameters_) bytes.push_back(p.nbytes());
  const auto assignment =
      assign_buckets(order, bytes, static_cast<size_t>(options_.first_bucket_mb * kMegabyte),
                     static_cast<size_t>(options_.bucket_cap_mb * kMegabyte));
  buckets_.clear();
  locators_.assign(parameters_.size(), {});
  std::vector<int64_t> numels;
  for (const std::vector<size_t>& members : assignment) {
    Bucket bucket;
    bucket.parameters = members;
    int64_t numel = 0;
    for (size_t slot = 0; slot < members.size(); ++slot) {
      locators_[members[slot]] = {buckets_.size(), slot};
      numel += parameters_[members[slot]].numel();
    }
    numels.push_back(numel);
    buckets_.push_back(std::move(bucket));
  }
  storage_->build(numels, device_);
  // Kept buffers are there from the start (gradients that are views of them move in at a
  // rebuild); the others come with each step's first gradient.
  if (!storage_->keeps_gradients()) return;
  for (size_t k = 0; k < buckets_.size(); ++k) take_buffer(buckets_[k], k);
}

void Reducer::take_buffer(Bucket& bucket, size_t index) {
  bucket.flat = storage_->buffer(index);
  make_views(bucket);
}

void Reducer::make_views(Bucket& bucket) const {
  bucket.views.clear();
  int64_t offset = 0;
  for (size_t index : bucket.parameters) {
    const Tensor& p = parameters_[index];
    // In the parameter's memory format, as PyTorch's bucket views (gradient_as_bucket_view).
    bucket.views.push_back(ops::dense_view(bucket.flat.slice(offset, offset + p.numel()), p.shape(),
                                           p.memory_format()));
    offset += p.numel();
  }
}

// Note [Bucket ordering]: rank 0's arrival order, so that all ranks agree. When rank 0 has no
// complete one (it shadowed the last step, Note [Joined ranks]) it sends its current order.
std::vector<size_t> Reducer::current_order() const {
  std::vector<size_t> order;
  for (const Bucket& bucket : buckets_) {
    order.insert(order.end(), bucket.parameters.begin(), bucket.parameters.end());
  }
  return order;
}

std::vector<size_t> Reducer::rebuild_order() const {
  return arrival_order_.size() == parameters_.size() ? arrival_order_ : current_order();
}

std::vector<std::vector<size_t>> Reducer::bucket_assignment() const {
  std::lock_guard lock(mutex_);
  std::vector<std::vector<size_t>> out;
  for (const Bucket& bucket : buckets_) out.push_back(bucket.parameters);
  return out;
}

// Note [Bucket order on resume]: with 3 or more ranks a bucket's all-reduce (Gloo's ring, NCCL's)
// adds each element's values in an order that depends on its place in the bucket, so the same
// gradients summed in other buckets differ in the last bits. A job resumed from a checkpoint
// would reduce its first step with the initial buckets where the uninterrupted job used the
// rebuilt ones. So bucket_order() is saved with a checkpoint and restore_bucket_order() resumes
// with it: the resumed job reduces every step exactly as the uninterrupted one (its rebuild
// already done). Two ranks add a + b = b + a, bit-exact in any layout.
std::vector<size_t> Reducer::bucket_order() const {
  std::lock_guard lock(mutex_);
  // Without the rebuild (and so under ZeRO) every run builds the same buckets: nothing to keep.
  if (!options_.rebuild_buckets || (!rebuilt_ && synced_steps_ == 0)) return {};
  return rebuild_due() ? rebuild_order() : current_order();
}

void Reducer::restore_bucket_order(const std::vector<size_t>& order) {
  std::lock_guard lock(mutex_);
  // Buckets that never change (Note [Shards per bucket]) are the ones the saving run had too,
  // unless it rebuilt its own: then the reduction order, not the result's correctness, differs.
  if (!options_.rebuild_buckets) return;
  TANDEM_CHECK(synced_steps_ == 0 && !expect_hooks_,
               "[DDP] restore_bucket_order must be called before the first backward pass");
  std::vector<bool> seen(parameters_.size(), false);
  bool permutation = order.size() == parameters_.size();
  for (size_t index : order) {
    permutation = permutation && index < seen.size() && !seen[index];
    if (permutation) seen[index] = true;
  }
  TANDEM_CHECK(permutation, "[DDP] a saved bucket order must name each of the model's ",
               parameters_.size(), " parameters once; it has ", order.size(), " entries");
  build_buckets(order);
  rebuilt_ = true;
}

}  // namespace tandem::parallel
