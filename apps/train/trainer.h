#pragma once
/// Trainer: one process's part of a train_cifar run, in any mode. It builds the data pipeline,
/// the model (plain, DataParallel or DistributedDataParallel), SGD and the LR schedule, then runs
/// epochs: train, evaluate, log, checkpoint. In ddp mode every rank runs one Trainer; metrics are
/// summed over ranks and rank 0 prints, logs and writes checkpoints.

#include <atomic>
#include <memory>
#include <optional>

#include "apps/train/metrics_log.h"
#include "apps/train/train_options.h"
#include "data/data_loader.h"
#include "nn/lr_schedule.h"
#include "nn/sgd.h"
#include "parallel/comm/process_group.h"
#include "parallel/distributed_data_parallel.h"

namespace tandem::apps {

/// Set from a signal handler (Ctrl-C): the run stops after the current step, keeping the last
/// checkpoint; in ddp every rank stops at the same step.
std::atomic<bool>& stop_requested();

struct PassMetrics {
  double loss = 0;      ///< mean over the images seen
  double accuracy = 0;  ///< in [0, 1]
  int64_t images = 0;   ///< over all ranks
  double seconds = 0;
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
  /// the rank trains (its GPU under NCCL).
  Trainer(const TrainOptions& options, std::shared_ptr<parallel::ProcessGroup> group);
  ~Trainer();

  RunSummary run();
  /// Test-set loss and accuracy of the current weights.
  PassMetrics evaluate();

 private:
  void build_data();
  void build_model();
  void build_schedule();
  int64_t steps_per_epoch() const;
  void resume();
  std::optional<PassMetrics> train_epoch(int epoch);
  /// Sums values over ranks (ddp), so that every rank sees the job's totals.
  std::vector<double> sum_over_ranks(std::vector<double> values);
  bool all_ranks_continue();
  void save_checkpoint(int epochs_done);
  void print_header();
  bool is_leader() const { return rank_ == 0; }

  TrainOptions options_;
  std::shared_ptr<parallel::ProcessGroup> group_;
  int rank_ = 0;
  int world_ = 1;
  Device device_ = Device::cpu();  ///< where batches go (dp: the first device)
  MemoryFormat memory_format_ = MemoryFormat::Contiguous;  ///< of the model and the batches
  std::vector<Device> dp_devices_;

  std::shared_ptr<const data::CifarDataset> train_set_, test_set_;
  std::unique_ptr<data::DataLoader> train_loader_, test_loader_;
  std::shared_ptr<nn::Module> network_;  ///< the ResNet itself: checkpoints hold its weights
  std::shared_ptr<nn::Module> model_;    ///< what forward() runs: network_ or its wrapper
  std::shared_ptr<parallel::DistributedDataParallel> ddp_;  ///< model_ in ddp mode, else null
  /// ddp without --drop-last on data that does not divide over the ranks: the ranks with fewer
  /// batches join (parallel::Join) instead of padding, unless SyncBatchNorm or --accumulate
  /// forbid it.
  bool uneven_shares_ = false;
  int64_t batches_per_epoch_ = 0;  ///< of the rank with the most (they set the schedule)
  std::unique_ptr<nn::Sgd> optimizer_;
  std::shared_ptr<const nn::LrSchedule> schedule_;
  int start_epoch_ = 0;
  int64_t step_ = 0;  ///< optimizer steps taken, over the whole run
  MetricsLog log_;
};

}  // namespace tandem::apps
