#pragma once
/// Join: training on ranks with different numbers of batches (PyTorch's
/// torch.distributed.algorithms.Join). A rank that has run out of data calls finish(), which
/// keeps answering the collectives of the ranks still training until every rank has finished;
/// nothing is dropped or padded and nothing hangs. Join knows its joinables only through the
/// Joinable interface (parallel/joinable.h): DDP and the optimizer's state each bring a hook.
///
///   parallel::SgdJoinable momentum(optimizer, ddp.process_group());
///   parallel::Join join({ddp, momentum});               // DDP first: its forward drives rounds
///   while (auto batch = loader.next()) {                // ranks may see different counts
///     cross_entropy(ddp.forward(batch->images), batch->labels).backward();
///     optimizer.step();
///   }
///   join.finish();                                      // waits for the others, then equalises
///
/// Note [Join protocol]: while a Join is alive, every forward of the first joinable (DDP) starts
/// with one small all-reduce, [1 per rank that trains, does a rank ask to stop, the joinable's
/// flags (Note [Join rounds]; DDP's: does this step synchronise gradients, does it broadcast
/// buffers)]; ranks in finish() take part with zeros. Every rank thus learns, in the same step,
/// who still trains. A joined rank then runs each joinable's main hook, which does what the step
/// of the others does: for DDP the buffer broadcast when there is one, from the lowest rank
/// still training (it has the newest statistics), and one zero-filled reduction per gradient
/// bucket (Note [Joined ranks] in reducer.cpp). When a round finds no rank training, every rank
/// runs the post hooks and finish() returns.
///
/// Note [Join final model]: a joined rank skipped the optimizer steps the others took after it
/// ran out of data, so the post hooks make every rank take the state of the lowest rank that
/// trained until the last step: DDP's the parameters and buffers (as PyTorch's join hook does),
/// SgdJoinable's the momentum buffers, which PyTorch leaves apart. Without it the replicas would
/// drift apart from the next epoch on. Skipped when every rank trained until the end.
///
/// Limits, as in PyTorch: every DDP forward in training must be followed by its backward (a
/// joined rank cannot know about a forward without one); SyncBatchNorm cannot be joined (its
/// forward runs collectives a joined rank has no input for); one Join at a time per model, and
/// finish() once per Join.

#include <functional>
#include <memory>
#include <vector>

#include "parallel/joinable.h"

namespace tandem::parallel {

/// Options every hook of a Join sees (PyTorch passes them to each join_hook as keywords).
struct JoinOptions {
  /// For DDP. true (PyTorch's default): gradients are always averaged over the world size, so
  /// in steps where some ranks have joined their zeros count (a smaller step). false: over the
  /// ranks that still train in that step.
  bool divide_by_initial_world_size = true;
  /// Polled on every rank once per step; when it returns true on any rank, every rank learns it
  /// in the same step: stop_agreed() turns true on the ranks that train, and finish() returns
  /// false on the joined ones. For stopping a run on an interrupt without a hang.
  std::function<bool()> stop_requested{};
};

class Join {
 public:
  /// `joinables`: the same kinds in the same order on every rank, all on one process group; the
  /// first drives the rounds (Note [Join rounds]). They must outlive the Join.
  explicit Join(std::vector<std::reference_wrapper<Joinable>> joinables, JoinOptions options = {});
  explicit Join(Joinable& joinable, JoinOptions options = {})
      : Join(std::vector<std::reference_wrapper<Joinable>>{joinable}, std::move(options)) {}
  ~Join();
  Join(const Join&) = delete;
  Join& operator=(const Join&) = delete;

  /// This rank has no more batches: answers the others' collectives until every rank has called
  /// finish() (Note [Join protocol]), then runs the post hooks, which make the joinables' state
  /// equal everywhere (Note [Join final model]). Returns true then, or false as soon as a rank
  /// asked to stop (JoinOptions::stop_requested).
  bool finish();
  /// A rank asked to stop in the step that just began (every rank learns it in the same step).
  bool stop_agreed() const { return stop_agreed_; }
  const JoinOptions& options() const { return options_; }

  /// For the first joinable's step on a rank that trains: the step's round (Note [Join
  /// protocol]); `flags`: this rank's, as many as joinable.join_round_flags().
  JoinRound notify(const Joinable& joinable, const std::vector<bool>& flags);

 private:
  JoinRound exchange(bool training, const std::vector<bool>& flags);

  std::vector<Joinable*> joinables_;
  std::vector<std::unique_ptr<JoinHook>> hooks_;  ///< one per joinable, same order
  ProcessGroup& group_;
  int flag_count_ = 0;  ///< the first joinable's round flags
  JoinOptions options_;
  JoinRound last_with_training_;  ///< the last round in which some rank trained
  bool stop_agreed_ = false;
  bool finished_ = false;
};

}  // namespace tandem::parallel
