#pragma once
/// CheckpointKeeper: a train_cifar run's checkpoints. It resolves --resume once, loads the
/// checkpoint (from an epoch boundary or the middle of an epoch) and makes every rank agree on
/// where the run starts; it checks --save's path before any step, decides when to save in the
/// middle of an epoch (Note [Mid-epoch checkpoints] in run_position.h), and saves.
///
///   CheckpointKeeper keeper(options, group, report, resume_source(options));
///   make_training_setup(..., [&](nn::Module& n, nn::Sgd& o) { keeper.resume(n, o); });
///   keeper.check_outputs(*setup.network);
///   keeper.check_ranks_resume_alike();           // a collective, after the data are built
///   ... keeper.start() ... keeper.save(position, setup) ...   // save: every rank, together
///
/// Every method runs on every rank; rank 0 alone writes (and checks where it writes), and what it
/// says goes through the RunReport, which speaks on rank 0 only (Note [One rank speaks]).

#include <cstdint>
#include <memory>
#include <string>

#include "apps/common/output_lock.h"
#include "apps/common/training_setup.h"
#include "apps/train_cifar/run_position.h"
#include "apps/train_cifar/run_report.h"
#include "apps/train_cifar/train_options.h"
#include "parallel/comm/process_group.h"

namespace tandem::apps {

class CheckpointKeeper {
 public:
  /// group: the ddp process group, else null. resume_path: resume_source(options), resolved once
  /// by the caller (it also decides whether the metrics log appends), or "" to start afresh.
  CheckpointKeeper(const TrainOptions& options, std::shared_ptr<parallel::ProcessGroup> group,
                   RunReport& report, std::string resume_path);

  /// Whether this run continues from a checkpoint.
  bool resumes() const { return !resume_path_.empty(); }
  /// Loads the checkpoint into `network` and `optimizer` on every rank (nothing without one) and
  /// sets start(). Runs before DDP wraps the network, whose constructor then broadcasts rank 0's
  /// weights (make_training_setup's BeforeWrapping).
  void resume(nn::Module& network, nn::Sgd& optimizer);
  /// After DDP has wrapped the network: its gradient buckets as the checkpoint recorded them
  /// (apps/train_cifar/saved_buckets.h), so the resumed steps reduce as the saved run's would.
  void restore_buckets(const TrainingSetup& setup) const;
  /// The ranks of the run that wrote the checkpoint (this run's when it did not record them, or
  /// without a checkpoint): Note [Resume at another world size].
  int resumed_world_size() const;
  /// Where this invocation begins: the checkpoint's position, or the run's start.
  const RunPosition& start() const { return start_; }
  /// Every rank must resume from the same position (a checkpoint one rank cannot see would
  /// start it afresh): one line otherwise. A collective in ddp.
  void check_ranks_resume_alike();

  /// --save's path, with room for two checkpoints of `network` (the new one and the previous one
  /// kept), before any step (apps/common/output_paths.h): nothing but regular files replaced,
  /// no other run's checkpoint replaced without --resume or --overwrite (Note [New run, old
  /// checkpoint]), and locked for the run's lifetime (Note [One writer per output]). Rank 0 only,
  /// as it alone writes. MetricsLog checks --log-json's.
  void check_outputs(const nn::Module& network);
  /// Whether to save after the optimizer step that ended with `batches_done` batches of the
  /// epoch, `step` steps into the run (Note [Mid-epoch checkpoints]).
  bool mid_epoch_save_due(int64_t step, int64_t batches_done, const EpochShares& shares) const;
  /// Writes the checkpoint of `position` (nothing without --save) and logs it; every rank calls
  /// it at the same step (Note [Saving on every rank]).
  void save(const RunPosition& position, const TrainingSetup& setup);

 private:
  TrainOptions options_;
  std::shared_ptr<parallel::ProcessGroup> group_;
  int rank_ = 0;
  int world_ = 1;
  RunReport& report_;
  std::string resume_path_;  ///< the checkpoint this run resumes from, or ""
  RunPosition start_{};      ///< where this invocation began: the checkpoint's position, or 0
  nn::Metadata resumed_{};   ///< the checkpoint's training-state metadata
  std::unique_ptr<OutputLock> save_lock_;  ///< --save's, held from check_outputs() on
};

}  // namespace tandem::apps
