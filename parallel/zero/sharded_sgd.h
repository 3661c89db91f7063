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
/// Note [Sharded data parallel]: DDP's memory weakness is that every rank holds all of the
/// parameters, gradients and optimizer state. ZeRO (Rajbhandari et al. 2020) splits them:
/// - stage 1 (Sharding::Optimizer; PyTorch's ZeroRedundancyOptimizer): gradients are
///   all-reduced as in DDP; each rank keeps momentum only for its part (Note [Shards per bucket]
///   in shard_layout.h), steps that part from the reduced bucket, and the parts are all-gathered
///   back into every rank's parameters, bucket by bucket (FlatParameters, in place);
/// - stage 2 (Sharding::Gradients; FSDP's SHARD_GRAD_OP): as stage 1, but each bucket is
///   reduce-scattered while backward runs, as DDP's all-reduces are, and a rank keeps only its
///   part of the gradients (Note [Sharded gradients] in sharded_buckets.h);
/// - stage 3 (parameters sharded too, gathered per layer before its forward and backward) is not
///   built.
/// A step thus moves the bytes of one all-reduce either way (a reduce-scatter and an all-gather
/// are each half of a ring all-reduce), and stage 1 adds the all-gather on top of DDP's
/// all-reduce. Each bucket's all-gather is launched as soon as its part has been stepped, so it
/// travels while the next bucket's part is stepped.
///
/// The result is DDP's: SGD is elementwise, so a part stepped on its own gets exactly the update
/// it gets inside the whole parameter, from the same reduced gradient. Stage 1's gradients are
/// DDP's all-reduce bit for bit; stage 2's reduce-scatter adds the ranks' contributions in
/// another order than the all-reduce (Note [Ring reduce-scatter]): with 2 ranks a + b either way
/// (bit-identical), with more each element differs by float rounding (|Δg| ≤ 2(W−1)·2⁻²⁴·Σ|g_r|,
/// the two orders' error bounds added).
///
/// Checkpoints (Note [One checkpoint format]): the state is the same as plain SGD's, whatever the
/// world size and stage. consolidated() gathers the parts on one rank into an nn::Sgd over the
/// module's parameters, which nn::save_checkpoint() writes as it writes plain DDP's; and a
/// ShardedSgd is built from an nn::Sgd holding the whole state (none, or what
/// nn::load_checkpoint() loaded on every rank), of which it keeps its part and drops the rest.
/// Resuming at another world size or stage is therefore the ordinary load, then this
/// constructor: the one place that maps a whole state to a rank's part.
///
/// Note [Counted memory]: what a rank holds is counted in bytes, not read off the RSS (whose
/// activations and allocator caches drown the differences): state_bytes() here, and
/// DistributedDataParallel::model_state_bytes() for the parameters and the gradients at their
/// peak in a step (.grad tensors of their own, the buckets, stage 2's shards and its most bucket
/// bytes alive at once). Per rank, with P the bytes of one float32 copy of the trained
/// parameters and W ranks: momentum P (stage 0) or about P/W (stages 1, 2); gradients 2P
/// (.grad and the buckets; P with gradient_as_bucket_view) in stages 0 and 1, about P/W plus the
/// buckets in flight in stage 2. Not counted: the gradient autograd produces for one parameter,
/// which lives from its accumulation to its hook, where stage 2 drops it.
///
/// Join (uneven inputs; parallel/join.h): ShardedSgd is a Joinable. Give the Join the DDP model
/// first, then the ShardedSgd. Every rank owns a part of the model, so a rank that has joined
/// must go on stepping its part: in each round that synchronises gradients its hook steps the
/// part from the shadowed reduction (Note [Joined ranks] in reducer.cpp) and joins the
/// all-gathers. The training ranks' step() first agrees on the learning rate (an all-reduce of
/// it, the largest wins), since a joined rank's schedule stopped. PyTorch's
/// ZeroRedundancyOptimizer also steps on joined ranks, with their own learning rate. Under a
/// Join, every synchronised backward must be followed by one step() (a step the joined ranks
/// cannot see would leave their collectives a step behind: the consistency check then fails).
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
