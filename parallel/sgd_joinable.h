#pragma once
/// SgdJoinable: an nn::Sgd's momentum buffers as a Joinable (parallel/joinable.h), so that after
/// a Join every rank holds the momentum of a rank that trained until the last step (Note [Join
/// final model]). nn knows nothing of processes, so the adapter lives here.
///
/// Note [Undefined optimizer state]: nn::Sgd creates a parameter's momentum buffer at its first
/// step, and never with momentum 0. So after a Join the buffers defined on the ranks may differ:
/// a rank without a batch has none, and a parameter first stepped after a rank joined has one
/// only on the ranks that trained on. broadcast_optimizer_state() first broadcasts which tensors
/// the source holds (and their sizes); a rank creates those it lacks, every rank skips those the
/// source lacks, and if the lists still differ (another optimizer, other parameters) every rank
/// throws the same [Join] error: a broadcast of mismatched sizes would hang or corrupt memory, so
/// none is started.

#include <memory>
#include <vector>

#include "nn/sgd.h"
#include "parallel/joinable.h"

namespace tandem::parallel {

class SgdJoinable final : public Joinable {
 public:
  /// `optimizer` and `group` must outlive every Join this is given to.
  SgdJoinable(nn::Sgd& optimizer, ProcessGroup& group) : optimizer_(optimizer), group_(group) {}

  /// Its post hook runs broadcast_optimizer_state() on the momentum buffers; it has no main
  /// hook, since a step of SGD runs no collective.
  std::unique_ptr<JoinHook> join_hook(Join& join) override;
  ProcessGroup& join_process_group() override { return group_; }

 private:
  nn::Sgd& optimizer_;
  ProcessGroup& group_;
};

/// Makes `state` equal to `source`'s on every rank (a collective; Note [Undefined optimizer
/// state]). state[i] may be undefined; a rank that lacks one the source has creates it like
/// like[i] (its parameter), with the source's values.
void broadcast_optimizer_state(ProcessGroup& group, std::vector<Tensor>& state,
                               const std::vector<Tensor>& like, int source);

}  // namespace tandem::parallel
