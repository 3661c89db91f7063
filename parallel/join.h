#pragma once
/// Join: DDP training on ranks with different numbers of batches (PyTorch's
/// torch.distributed.algorithms.Join with DDP's join hook). A rank that has run out of data calls
/// finish(), which keeps answering the collectives of the ranks still training until every rank
/// has finished; nothing is dropped or padded and nothing hangs.
///
///   parallel::Join join(ddp);
///   while (auto batch = loader.next()) {                // ranks may see different counts
///     cross_entropy(ddp.forward(batch->images), batch->labels).backward();
///     optimizer.step();
///   }
///   join.finish(optimizer.momentum_buffers());          // waits for the others, then equalises
///
/// Note [Join protocol]: while a Join is alive, every DDP forward starts with one small
/// all-reduce, [1 per rank that trains, does it synchronise gradients this step, does a rank ask
/// to stop]; ranks in finish() take part with zeros. Every rank thus learns, in the same step,
/// who still trains. A joined rank then runs what the forward and backward of the others run:
/// the buffer broadcast, now from the lowest rank still training (it has the newest statistics),
/// and one zero-filled reduction per gradient bucket (Note [Joined ranks] in reducer.h). When a
/// round finds no rank training, finish() returns on every rank.
///
/// Note [Join final model]: a joined rank skipped the optimizer steps the others took after it
/// ran out of data, so finish() ends by broadcasting the parameters and buffers of a rank that
/// trained until the last step, and `also_sync` (optimizer state, such as momentum), to every
/// rank, as PyTorch's join hook does for the model. Without it the replicas would drift apart
/// from the next epoch on. Skipped when every rank trained until the end.
///
/// Limits, as in PyTorch: every DDP forward in training must be followed by its backward (a
/// joined rank cannot know about a forward without one); SyncBatchNorm cannot be joined (its
/// forward runs collectives a joined rank has no input for); one Join at a time per model, and
/// finish() once per Join.

#include <functional>
#include <vector>

#include "engine/tensor.h"

namespace tandem::parallel {

class DistributedDataParallel;

struct JoinOptions {
  /// true (PyTorch's default): gradients are always averaged over the world size, so in steps
  /// where some ranks have joined their zeros count (a smaller step). false: over the ranks that
  /// still train in that step.
  bool divide_by_initial_world_size = true;
  /// Polled on every rank once per step; when it returns true on any rank, every rank learns it
  /// in the same step: stop_agreed() turns true on the ranks that train, and finish() returns
  /// false on the joined ones. For stopping a run on an interrupt without a hang.
  std::function<bool()> stop_requested{};
};

class Join {
 public:
  explicit Join(DistributedDataParallel& ddp, JoinOptions options = {});
  ~Join();
  Join(const Join&) = delete;
  Join& operator=(const Join&) = delete;

  /// This rank has no more batches: answers the others' collectives until every rank has called
  /// finish() (Note [Join protocol]), then makes the model and `also_sync` equal everywhere (Note
  /// [Join final model]; `also_sync`: defined tensors, alike on every rank). Returns true then,
  /// or false as soon as a rank asked to stop (JoinOptions::stop_requested).
  bool finish(const std::vector<Tensor>& also_sync = {});
  /// A rank asked to stop in the step that just began (every rank learns it in the same step).
  bool stop_agreed() const { return stop_agreed_; }

  /// For DistributedDataParallel::forward on a rank that trains: the step's join all-reduce.
  /// `sync`: this forward will be followed by a gradient all-reduce. Returns the rank whose
  /// buffers this step's forward broadcasts.
  int notify_training_step(bool sync);

 private:
  /// What one round of Note [Join protocol] told every rank.
  struct Round {
    std::vector<bool> training;  ///< per rank
    int training_count = 0;
    int first_training = -1;  ///< lowest rank that trains; -1 when none
    bool sync = false;        ///< the training ranks synchronise gradients this step
    bool stop = false;        ///< some rank asked to stop
  };
  Round exchange(bool training, bool sync);
  void equalize(const std::vector<Tensor>& also_sync);

  DistributedDataParallel& ddp_;
  JoinOptions options_;
  Round last_with_training_;  ///< the last round in which some rank trained
  bool stop_agreed_ = false;
  bool finished_ = false;
};

}  // namespace tandem::parallel
