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
///
/// Note [Buffer broadcast]: with broadcast_buffers, rank 0's buffers (batch-norm statistics)
/// travel at the start of a forward only when the previous forward was a synchronised training
/// one (grad mode, not under no_sync()) or there was none, as PyTorch's
/// require_forward_param_sync: so the first no_grad forward after training and the first
/// no_sync micro-step broadcast, the later ones and the synchronised step after no_sync ones do
/// not. Evaluating uneven shards through the wrapper under no_grad thus runs one broadcast on
/// every rank, not one per batch: ranks with fewer batches would leave the others waiting in a
/// broadcast. Under a Join the round
/// carries whether this step broadcasts, and from which rank (Note [Join protocol]).
///
/// Sharded data parallel (ZeRO; Note [Sharded data parallel] in parallel/zero/sharding.h): with
/// options.sharding the buckets are fixed at construction and the trained parameters move into
/// one flat buffer per bucket (FlatParameters), which a ShardedSgd steps a part of and
/// all-gathers; with Sharding::Gradients the Reducer's buckets are a ShardedBuckets, which
/// reduce-scatters them (Note [Sharded gradients] in parallel/zero/sharded_buckets.h).
///
/// DDP is a Joinable (parallel/joinable.h): under a Join, its forward drives the rounds, and its
/// hook shadows a step's buffer broadcast and gradient reductions on a joined rank, and ends by
/// broadcasting the model from the source rank (Note [Join final model]).

#include <memory>

#include "nn/module.h"
#include "parallel/bucket_storage.h"
#include "parallel/comm/process_group.h"
#include "parallel/comm_hook.h"
#include "parallel/joinable.h"
#include "parallel/reducer.h"
#include "parallel/zero/flat_parameters.h"
#include "parallel/zero/sharding.h"

namespace tandem::parallel {

struct DdpOptions {
  ReducerOptions reducer{};  ///< buckets, unused parameters, bucket views, overlap
  /// Rank 0's buffers (BN statistics) to every rank at the start of a forward (Note [Buffer
  /// broadcast]).
  bool broadcast_buffers = true;
  /// What is split across the ranks (ZeRO's stage): with Optimizer or Gradients the buckets are
  /// fixed (reducer.rebuild_buckets is turned off) and the parameters flattened per bucket; with
  /// Gradients the buckets also shard the gradients (ShardedBuckets). Step the model with a
  /// parallel::ShardedSgd.
  Sharding sharding = Sharding::None;
};

/// Bytes of the model state a rank holds (Note [Counted memory] in parallel/zero/sharding.h).
struct ModelStateBytes {
  size_t parameters = 0;  ///< the module's parameters (flat buffers, padding included)
  size_t gradients = 0;   ///< .grad tensors, gradient buckets or shards, at their peak in a step
  size_t optimizer = 0;   ///< the optimizer's state (momentum)
};

class DistributedDataParallel final : public nn::Module, public Joinable {
 public:
  DistributedDataParallel(std::shared_ptr<nn::Module> module, std::shared_ptr<ProcessGroup> group,
                          DdpOptions options = {});

  Tensor forward(const Tensor& input) override;
  std::string describe() const override;

  nn::Module& module() { return *module_; }
  ProcessGroup& process_group() { return *group_; }
  Reducer& reducer() { return *reducer_; }
  const Reducer& reducer() const { return *reducer_; }
  /// The Reducer's buckets (bucket_storage.h): what the last step reduced, for ShardedSgd.
  BucketStorage& bucket_storage() { return *buckets_; }
  Sharding sharding() const { return options_.sharding; }
  /// The flat parameter buffers (Sharding::Optimizer, Gradients), else null.
  const FlatParameters* flat_parameters() const { return flat_.get(); }
  /// The names of the Reducer's parameters (those that require grad), in its order.
  const std::vector<std::string>& trained_names() const { return trained_names_; }
  /// This rank's parameters and gradients as they are now (call after a step, before
  /// zero_grad()) and the optimizer's `optimizer_bytes` (Note [Counted memory]).
  ModelStateBytes model_state_bytes(size_t optimizer_bytes) const;
  /// Copies rank 0's buffers to every rank (a collective): what a training forward does with
  /// broadcast_buffers (Note [Buffer broadcast]); call it before evaluating module() directly.
  void sync_buffers();

  /// Gradient buckets are reduced by `hook` (Note [Communication hooks]), e.g.
  /// make_comm_hook(GradCompression::BFloat16). Once, before the first backward, on every rank.
  void register_comm_hook(std::shared_ptr<CommHook> hook) {
    reducer_->register_comm_hook(std::move(hook));
  }

  /// Joinable (Note [Join protocol]): the hook's main hook runs shadow_step(), its post hook
  /// broadcasts the parameters and buffers. Throws for a model with SyncBatchNorm, or one
  /// already under a Join.
  std::unique_ptr<JoinHook> join_hook(Join& join) override;
  ProcessGroup& join_process_group() override { return *group_; }
  /// [this step synchronises gradients, it broadcasts buffers] (kSyncFlag, kBroadcastFlag).
  int join_round_flags() const override { return 2; }

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

  /// Whether a Join round (Note [Join protocol]) driven by a DDP model synchronises gradients:
  /// every rank sees the same answer, joined ones included.
  static bool round_synchronises(const JoinRound& round);

 protected:
  std::shared_ptr<nn::Module> make_twin() const override;

 private:
  class DdpJoinHook;
  static constexpr size_t kSyncFlag = 0;       ///< in a JoinRound's flags
  static constexpr size_t kBroadcastFlag = 1;  ///< in a JoinRound's flags

  /// A joined rank's part in one training step of the others (Note [Join protocol]): the buffer
  /// broadcast if the step has one, and the gradient reductions if it synchronises.
  void shadow_step(const JoinRound& round);

  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<ProcessGroup> group_;
  DdpOptions options_;
  std::shared_ptr<BucketStorage> buckets_;  ///< the Reducer's (sharded at ZeRO stage 2)
  std::unique_ptr<Reducer> reducer_;
  std::unique_ptr<FlatParameters> flat_;  ///< sharding only
  std::vector<std::string> trained_names_;
  std::vector<Tensor> buffers_;  ///< the module's buffers, listed once: sync_buffers() sends them
  bool sync_ = true;
  /// The next forward broadcasts buffers (Note [Buffer broadcast]).
  bool require_forward_param_sync_ = true;
  Join* join_ = nullptr;  ///< the Join this model is under, if any (Note [Join protocol])
};

/// Throws, on every rank, when some rank's parameters differ from rank 0's in count, shape or
/// dtype, naming the first differing parameter and the ranks involved.
void verify_same_model(ProcessGroup& group, const nn::NamedTensors& parameters);

}  // namespace tandem::parallel
