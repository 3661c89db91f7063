#include "parallel/sync_batch_norm.h"

#include <unordered_set>

#include "nn/batch_norm2d.h"

namespace tandem::parallel {
namespace {

// Sums over the group's ranks. wait(), not synchronize() (Note [Work wait and synchronize]):
// batch norm's next kernels read the sums on the calling thread's stream, behind the
// collective, so the host goes on queueing (Note [Synchronised batch norm]). A collective that
// fails later surfaces from the group's next collective or the step's synchronisation, as a
// DDP bucket's does; one that fails at once throws here.
class ProcessGroupReducer final : public nn::StatisticsReducer {
 public:
  explicit ProcessGroupReducer(std::shared_ptr<ProcessGroup> group) : group_(std::move(group)) {}
  void sum_over_ranks(Tensor& values) override {
    try {
      group_->allreduce({values}, ReduceOp::Sum)->wait();
    } catch (const Error& e) {
      TANDEM_FAIL("[SyncBatchNorm] all-reduce of batch statistics failed: ", e.message());
    }
  }
  int rank() const override { return group_->rank(); }
  int size() const override { return group_->size(); }

 private:
  std::shared_ptr<ProcessGroup> group_;
};

void convert(nn::Module& module, const std::shared_ptr<nn::StatisticsReducer>& reducer,
             std::unordered_set<const nn::Module*>& seen) {
  if (!seen.insert(&module).second) return;  // a module shared in the tree counts once
  if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(&module)) bn->set_statistics_reducer(reducer);
  for (const auto& [name, child] : module.children()) convert(*child, reducer, seen);
}

}  // namespace

int convert_sync_batchnorm(nn::Module& module, std::shared_ptr<ProcessGroup> group) {
  TANDEM_CHECK(group != nullptr, "[SyncBatchNorm] no process group");
  const auto reducer = std::make_shared<ProcessGroupReducer>(std::move(group));
  std::unordered_set<const nn::Module*> seen;
  convert(module, reducer, seen);
  int count = 0;
  for (const nn::Module* m : seen) count += dynamic_cast<const nn::BatchNorm2d*>(m) ? 1 : 0;
  return count;
}

bool has_sync_batchnorm(const nn::Module& module) {
  const auto* bn = dynamic_cast<const nn::BatchNorm2d*>(&module);
  if (bn != nullptr && bn->is_synchronised()) return true;
  for (const auto& [name, child] : module.children()) {
    if (has_sync_batchnorm(*child)) return true;
  }
  return false;
}

}  // namespace tandem::parallel
