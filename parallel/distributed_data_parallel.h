#pragma once
/// DistributedDataParallel: one process per device, gradients averaged across processes by a
/// bucketed Reducer that overlaps its all-reduces with backward (torch.nn.parallel.
/// DistributedDataParallel).
///
///   auto group = init_process_group("gloo", from_environment());
///   DistributedDataParallel model(make_resnet("resnet20", generator), group);
///   cross_entropy(model.forward(images), labels).backward();  // gradients are averaged
///
/// At construction every rank's model is checked against rank 0's (parameter count, shapes,
/// dtypes; a mismatch names the first differing parameter on every rank), then rank 0's
/// parameters and buffers are broadcast to all. The module is child "module", as in PyTorch.

#include <memory>

#include "nn/module.h"
#include "parallel/comm/process_group.h"
#include "parallel/comm_hook.h"
#include "parallel/reducer.h"

namespace tandem::parallel {

struct DdpOptions {
  ReducerOptions reducer{};       ///< buckets, unused parameters, bucket views, overlap
  bool broadcast_buffers = true;  ///< every forward starts with rank 0's buffers (BN statistics)
};

class DistributedDataParallel final : public nn::Module {
 public:
  DistributedDataParallel(std::shared_ptr<nn::Module> module, std::shared_ptr<ProcessGroup> group,
                          DdpOptions options = {});

  Tensor forward(const Tensor& input) override;
  std::string describe() const override;

  nn::Module& module() { return *module_; }
  ProcessGroup& process_group() { return *group_; }
  Reducer& reducer() { return *reducer_; }
  /// Copies rank 0's buffers to every rank (a collective): what each training forward does with
  /// broadcast_buffers; call it before evaluating module() directly.
  void sync_buffers();

  /// Gradient buckets are reduced by `hook` (Note [Communication hooks]), e.g.
  /// make_comm_hook(GradCompression::BFloat16). Once, before the first backward, on every rank.
  void register_comm_hook(std::shared_ptr<CommHook> hook) {
    reducer_->register_comm_hook(std::move(hook));
  }

  /// For Join (Note [Join protocol]): a joined rank's part in one training step of the others:
  /// the buffer broadcast from `buffer_source` and, when `sync`, the gradient reductions.
  void shadow_step(int buffer_source, bool sync);

  /// While alive, backward passes only accumulate local gradients (gradient accumulation); the
  /// first backward after it ends averages everything accumulated. Like PyTorch's no_sync(),
  /// it affects the forward passes run under it.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp) : ddp_(ddp), previous_(ddp.sync_) {
      ddp.sync_ = false;
    }
    ~NoSyncGuard() { ddp_.sync_ = previous_; }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

 protected:
  std::shared_ptr<nn::Module> make_twin() const override;

 private:
  /// With broadcast_buffers, `root`'s buffers to every rank.
  void broadcast_buffers_from(int root);

  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<ProcessGroup> group_;
  DdpOptions options_;
  std::unique_ptr<Reducer> reducer_;
  std::vector<Tensor> buffers_;  ///< the module's buffers, listed once: sync_buffers() sends them
  bool sync_ = true;
  friend class Join;
  class Join* join_ = nullptr;  ///< the Join this model is under, if any (Note [Join protocol])
};

/// Throws, on every rank, when some rank's parameters differ from rank 0's in count, shape or
/// dtype, naming the first differing parameter and the ranks involved.
void verify_same_model(ProcessGroup& group, const nn::NamedTensors& parameters);

}  // namespace tandem::parallel
