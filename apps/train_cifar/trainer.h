#pragma once
/// Trainer: one process's part of a train_cifar run, in any mode. It builds the data pipeline,
/// the model (plain, DataParallel or DistributedDataParallel), SGD and the LR schedule, then runs
/// epochs: train, evaluate, checkpoint, report. In ddp mode every rank runs one Trainer; metrics
/// are summed over ranks. What the run says and logs is its RunReport's (rank 0 speaks, Note [One
/// rank speaks]); resuming and saving are its CheckpointKeeper's (rank 0 writes).

#include <atomic>
#include <memory>
#include <optional>

#include "apps/common/step_profiler.h"
#include "apps/common/training_setup.h"
#include "apps/train_cifar/checkpoint_keeper.h"
#include "apps/train_cifar/run_position.h"
#include "apps/train_cifar/run_report.h"
#include "apps/train_cifar/train_options.h"
#include "data/cifar10.h"
#include "data/data_loader.h"
#include "nn/lr_schedule.h"
#include "parallel/comm/process_group.h"

namespace tandem::parallel {
class Join;
}

namespace tandem::apps {

class PendingSteps;

/// Set from a signal handler (Ctrl-C): the run stops after the current step, keeping the last
/// checkpoint; in ddp every rank stops at the same step.
std::atomic<bool>& stop_requested();
/// Whether the epochs have begun. From then on an interrupt stops every rank together at a step
/// (stop_requested); before, nothing can be lost, and the rendezvous or a collective of the
/// start would not look at the flag until its timeout, so an interrupt ends the process at once.
std::atomic<bool>& training_started();

class Trainer {
 public:
  /// group: this process's process group in ddp mode, else null. Its tensor_device() is where
  /// the rank trains (its GPU under NCCL). local_ranks: the ddp ranks on this machine, this one
  /// included (the cores they share).
  Trainer(const TrainOptions& options, std::shared_ptr<parallel::ProcessGroup> group,
          int local_ranks = 1);
  ~Trainer();

  RunSummary run();
  /// Test-set loss and accuracy of the current weights.
  PassMetrics evaluate();

 private:
  /// resume_path: resume_source(options), resolved once for the report and the keeper.
  Trainer(const TrainOptions& options, std::shared_ptr<parallel::ProcessGroup> group,
          int local_ranks, std::string resume_path);
  void build_data();
  void read_data_sets();
  std::shared_ptr<const data::Sampler> make_train_sampler();
  void build_schedule();
  int64_t steps_per_epoch() const;
  /// What the header and the warnings describe.
  RunShape shape() const;
  struct Epoch;
  std::optional<PassMetrics> train_epoch(int number);
  void begin_epoch(Epoch& epoch, int number);
  void check_losses(const Epoch& epoch, int64_t first_batch,
                    const std::vector<double>& losses) const;
  /// Reads the steps left on the device, shows them, and agrees with the other ranks whether to
  /// go on (Note [Host syncs]).
  bool read_pending(Epoch& epoch);
  /// The epoch's metrics so far over every rank (a collective in ddp).
  EpochSoFar so_far(const Epoch& epoch);
  /// Forward and backward of one (micro-)batch, and the optimizer step that ends its group.
  /// False when the ranks agreed to stop (under a Join).
  bool train_batch(const data::Batch& batch, int64_t batch_index, int64_t batches,
                   parallel::Join* join, PendingSteps& pending);
  /// Trains the epochs from the start position up to `last_epoch`, evaluating and saving after
  /// each; fills `summary`.
  void train_epochs(int last_epoch, RunSummary& summary);
  /// Sums values over ranks (ddp), so that every rank sees the job's totals.
  std::vector<double> sum_over_ranks(std::vector<double> values);
  bool all_ranks_continue();
  /// --profile's window (Note [Profile window]); rank 0 prints the table, every rank writes files.
  StepProfilerOptions profile_options() const;
  /// Note [Counting FLOPs] (nn/flop_count.h): a training step's FLOPs per image, for the summary.
  double flops_per_image() const;

  TrainOptions options_;
  std::shared_ptr<parallel::ProcessGroup> group_;
  int rank_ = 0;
  int world_ = 1;
  int local_ranks_ = 1;      ///< ddp: the ranks on this machine
  RunReport report_;         ///< what the run prints and logs (rank 0's speaks)
  CheckpointKeeper keeper_;  ///< resume, the ranks' agreement on it, saves
  TrainingSetup setup_;      ///< devices, network, its wrapper and SGD

  std::shared_ptr<const data::CifarDataset> train_set_, test_set_;
  std::unique_ptr<data::DataLoader> train_loader_, test_loader_;
  EpochShares shares_{};  ///< the batches of an epoch over the ranks
  std::shared_ptr<const nn::LrSchedule> schedule_;
  int64_t step_ = 0;  ///< optimizer steps taken, over the whole run

  std::optional<StepProfiler> profile_;  ///< --profile (steps 0: does nothing)
};

}  // namespace tandem::apps
