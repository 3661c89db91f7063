#pragma once
/// ShardedSgd: SGD for sharded data parallel (ZeRO stages 1 and 2), each rank holding the
/// momentum of its part of the model only and stepping that part alone.
///
///   DistributedDataParallel model(net, group, {.sharding = Sharding::Gradients});
///   nn::Sgd sgd(net->parameters(), {.lr = 0.1f, .momentum = 0.9f});  // or loaded: a checkpoint
///   ShardedSgd optimizer(model, sgd);   // takes sgd's settings and this rank's part of its state
///   optimizer.zero_grad();
///   cross_entropy(model.forward(x), y).backward();  // stage 2: reduce-scatters while it runs
///   optimizer.step();                   // steps this rank's part, all-gathers the parameters
///
/// The stages and why the result is DDP's: Note [Sharded data parallel] in sharding.h. How a
/// whole checkpoint state becomes this rank's part and back: above take_state() in
/// sharded_sgd.cpp; Join (uneven inputs): above its hook there.
///
/// Limits: SGD only (what Tandem has); find_unused_parameters is refused with stage 2; the
/// parameters must be on their device and in their memory format before DDP wraps them; step()
/// after a backward under no_sync() (no reduction yet) steps nothing.

#include <memory>
#include <vector>

#include "nn/optimizer.h"
#include "nn/sgd.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/joinable.h"

namespace tandem::parallel {

class ShardedSgd final : public nn::Optimizer, public Joinable {
 public:
  /// `ddp`: built with a Sharding other than None; it must outlive this. `full`: an nn::Sgd over
  /// ddp.module().parameters(), whose settings this takes and whose momentum buffers (none yet,
  /// or a checkpoint's) it takes its part of, leaving `full` without them.
  ShardedSgd(DistributedDataParallel& ddp, nn::Sgd& full);

  /// Steps this rank's part from the reduced gradients and all-gathers the parameters (a
  /// collective); nothing when no backward has reduced gradients since zero_grad().
  void step() override;
  /// This rank's part of the reduced gradients, one slice per parameter segment: what step()
  /// reads (none when no backward has reduced gradients since zero_grad()).
  std::vector<Tensor> gradients() const override;
  void zero_grad() override;
  float lr() const override { return config_.lr; }
  void set_lr(float lr) override;
  const nn::SgdConfig& config() const { return config_; }
  /// Bytes of this rank's momentum: its parts alone (Note [Counted memory]).
  size_t state_bytes() const override;

  /// A collective: on rank `root`, an nn::Sgd over the module's parameters holding the whole
  /// momentum, as plain DDP's optimizer would (what nn::save_checkpoint takes); null elsewhere.
  std::unique_ptr<nn::Sgd> consolidated(int root);

  /// Joinable (Note [Sharded data parallel], Join): the hook steps this rank's part in each
  /// round that synchronises.
  std::unique_ptr<JoinHook> join_hook(Join& join) override;
  ProcessGroup& join_process_group() override { return ddp_.process_group(); }

 private:
  class JoinHookImpl;
  /// The largest learning rate over the ranks; a joined rank brings none.
  float agree_lr(bool joined);
  /// Steps every bucket's part and all-gathers it.
  void step_parts();
  void step_bucket(size_t k);
  /// Where this rank's part of bucket k's reduced gradients starts in buckets_.reduced(k).
  int64_t reduced_part_begin(size_t k) const;
  void take_state(nn::Sgd& full);

  DistributedDataParallel& ddp_;
  const FlatParameters& flat_;
  BucketStorage& buckets_;  ///< the reduced gradients it steps from
  nn::SgdConfig config_;
  std::vector<Tensor> module_parameters_;  ///< what consolidated()'s nn::Sgd is built over
  std::vector<Tensor> momentum_;           ///< per bucket: this rank's part (momentum only)
  /// Per trained parameter: its momentum exists (nn::Sgd's defined buffer), the same on every
  /// rank, so that consolidated() knows which to write.
  std::vector<bool> has_momentum_;
  Join* join_ = nullptr;  ///< the Join this is under, if any
};

}  // namespace tandem::parallel
