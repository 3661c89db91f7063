#pragma once
/// Joinable: what parallel::Join needs of a thing that runs collectives in training (PyTorch's
/// torch.distributed.algorithms.Joinable). Join knows no concrete joinable: DDP is one (its
/// per-step buffer broadcast and gradient reductions, its final model), SgdJoinable another (the
/// optimizer's momentum). Each brings a JoinHook for the time its rank has joined.
///
/// Note [Join rounds]: the first joinable given to a Join drives it: each of its training steps
/// calls Join::notify() once, which runs the round's all-reduce (Note [Join protocol] in join.h)
/// and returns what every rank learnt. A joinable may add flags to the round (how many:
/// join_round_flags()); each comes back as the number of training ranks that set it, so joined
/// ranks learn, for instance, whether this step reduces gradients or broadcasts buffers.

#include <memory>
#include <vector>

#include "parallel/comm/process_group.h"

namespace tandem::parallel {

class Join;

/// What one round told every rank (Note [Join protocol]).
struct JoinRound {
  int training_count = 0;   ///< ranks that train in this step
  int first_training = -1;  ///< the lowest of them; -1 when none
  std::vector<int> flags;   ///< per flag of the first joinable: the training ranks that set it
  bool stop = false;        ///< some rank asked to stop (JoinOptions::stop_requested)
};

/// A joinable's part while its rank has joined (PyTorch's JoinHook). Join owns the hooks from
/// its constructor to its destructor: a hook's destructor undoes what the Join changed.
class JoinHook {
 public:
  virtual ~JoinHook() = default;
  /// On a joined rank, once per round in which some rank trains: run what that step of the
  /// training ranks runs (the same collectives, with zeros).
  virtual void main_hook(const JoinRound& round) { (void)round; }
  /// On every rank, once every rank has joined. `source`: the lowest rank that trained until
  /// the last step, whose state every rank takes (Note [Join final model]); -1 when every rank
  /// trained until the end, so that nothing needs equalising.
  virtual void post_hook(int source) { (void)source; }
};

class Joinable {
 public:
  virtual ~Joinable() = default;
  /// This joinable's hook for `join`, called once by Join's constructor (which fixes the
  /// options, JoinOptions, for all its hooks).
  virtual std::unique_ptr<JoinHook> join_hook(Join& join) = 0;
  /// The group whose ranks join; every joinable of a Join must use the same.
  virtual ProcessGroup& join_process_group() = 0;
  /// Flags this joinable adds to every round when it drives the Join (Note [Join rounds]).
  virtual int join_round_flags() const { return 0; }
};

}  // namespace tandem::parallel
