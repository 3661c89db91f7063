#pragma once
/// Trainer: one process's part of a train_cifar run, in any mode. It builds the data pipeline,
/// the model (plain, DataParallel or DistributedDataParallel), SGD and the LR schedule, then runs
/// epochs: train, evaluate, log, checkpoint. In ddp mode every rank runs one Trainer; metrics are
/// summed over ranks and rank 0 prints, logs and writes checkpoints.

#include <atomic>
#include <memory>
#include <optional>

#include "apps/common/training_setup.h"
#include "apps/train_cifar/metrics_log.h"
#include "apps/train_cifar/progress.h"
#include "apps/train_cifar/run_position.h"
#include "apps/train_cifar/train_options.h"
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

struct PassMetrics {
  double loss = 0;      ///< mean over the images seen
  double accuracy = 0;  ///< in [0, 1]
  int64_t images = 0;   ///< over all ranks
  double seconds = 0;
  /// This rank's host reads during the pass (Note [Counting host reads]): with nothing read in a
  /// training step, one per kHostSyncEvery steps, plus the ranks' agreements in ddp.
  int64_t host_reads = 0;
};

struct RunSummary {
  int epochs_done = 0;
  double best_accuracy = 0;
  double last_accuracy = 0;
  double train_seconds = 0;
  double images_per_second = 0;  ///< training images (all ranks) per second of training
  bool interrupted = false;
};

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
  void build_data();
  void read_data_sets();
  std::shared_ptr<const data::Sampler> make_train_sampler();
  void build_schedule();
  int64_t steps_per_epoch() const;
  void resume(const std::string& path, nn::Module& network, nn::Sgd& optimizer);
  /// Every rank must resume from the same position (a checkpoint one rank cannot see would
  /// start it afresh): one line otherwise.
  void check_ranks_resume_alike();
  struct Epoch;
  std::optional<PassMetrics> train_epoch(int number);
  void begin_epoch(Epoch& epoch, int number);
  /// The progress bar's width, or nothing for plain lines (--no-progress, a file, a pipe).
  std::optional<int> bar_columns() const;
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
  /// Whether to save after this step, in the middle of the epoch (Note [Mid-epoch checkpoints]).
  bool mid_epoch_save_due(int64_t batches_done) const;
  /// Sums values over ranks (ddp), so that every rank sees the job's totals.
  std::vector<double> sum_over_ranks(std::vector<double> values);
  bool all_ranks_continue();
  void save_checkpoint(const RunPosition& position);
  /// --save's path, with room for two checkpoints (the new one and the previous one kept),
  /// before any step (apps/common/output_paths.h); MetricsLog checks --log-json's.
  void check_outputs() const;
  void print_header();
  void print_warnings() const;
  void print_summary(const RunSummary& summary, int last_epoch);
  void print_next_steps(const RunSummary& summary, int last_epoch) const;
  std::string what_is_saved() const;
  void report_epoch(int epoch, float lr, const PassMetrics& train, const PassMetrics& test);
  void log_position(const char* type, const RunPosition& position);
  bool is_leader() const { return rank_ == 0; }

  TrainOptions options_;
  std::shared_ptr<parallel::ProcessGroup> group_;
  int rank_ = 0;
  int world_ = 1;
  int local_ranks_ = 1;  ///< ddp: the ranks on this machine
  /// The checkpoint this run resumes from (resume_source(): --resume auto resolved once), or "".
  std::string resume_path_;
  TrainingSetup setup_;  ///< devices, network, its wrapper and SGD

  std::shared_ptr<const data::CifarDataset> train_set_, test_set_;
  std::unique_ptr<data::DataLoader> train_loader_, test_loader_;
  /// ddp without --drop-last on data that does not divide over the ranks: the ranks with fewer
  /// batches join (parallel::Join) instead of padding, unless SyncBatchNorm or --accumulate
  /// forbid it.
  bool uneven_shares_ = false;
  int64_t batches_per_epoch_ = 0;       ///< of the rank with the most (they set the schedule)
  int64_t batches_all_ranks_have_ = 0;  ///< of the rank with the fewest
  std::shared_ptr<const nn::LrSchedule> schedule_;
  RunPosition start_{};  ///< where this invocation began: the checkpoint's position, or 0
  int64_t step_ = 0;     ///< optimizer steps taken, over the whole run
  MetricsLog log_;
  RunClock run_clock_;  ///< this invocation's time, for the whole run's time left
};

}  // namespace tandem::apps
