#pragma once
/// RunReport: what a train_cifar run says and records: the header and the warnings before the
/// first step, each epoch's progress bar and line, the end-of-run summary and what to do next, and
/// the JSON-lines metrics log (--log-json), with the run's clock behind the times it prints.
///
/// Note [One rank speaks]: in ddp every rank builds a RunReport, and only rank 0's is enabled;
/// the others print nothing, open no log and make no progress bar. The guard lives here, once,
/// as Lightning's rank_zero_only, so the Trainer and the CheckpointKeeper call the report on every
/// rank without asking which rank they are. Whatever a line needs from the other ranks (the
/// epoch's totals) is summed over them before the report is called, on every rank alike.

#include <cstdint>
#include <optional>
#include <string>

#include "apps/common/training_setup.h"
#include "apps/train_cifar/metrics_log.h"
#include "apps/train_cifar/progress.h"
#include "apps/train_cifar/run_position.h"
#include "apps/train_cifar/train_options.h"

namespace tandem::apps {

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
  double flops_per_image = 0;    ///< a training step's, Note [Counting FLOPs] (nn/flop_count.h)
  bool interrupted = false;
};

/// The run as the Trainer built it, for the header and the warnings.
struct RunShape {
  const TrainingSetup* setup = nullptr;  ///< devices, network, memory format
  std::string backend{};                 ///< ddp: the process group's ("gloo", "nccl")
  int world = 1;                         ///< ddp: the job's ranks
  int local_ranks = 1;                   ///< ddp: the ranks on this machine (sharing its cores)
  int saved_world = 1;                   ///< a resume: the ranks of the run it continues
  int64_t train_images = 0;
  int64_t test_images = 0;
  EpochShares shares{};
};

class RunReport {
 public:
  /// enabled: this process speaks for the job (rank 0; Note [One rank speaks]). world: the job's
  /// ranks, as the log records name them. append_log: the run resumes, so --log-json grows rather
  /// than starts afresh (one file holds the whole run).
  RunReport(const TrainOptions& options, int world, bool enabled, bool append_log);

  /// The header line, and where a resumed run starts.
  void print_header(const RunShape& run, const RunPosition& start) const;
  /// Settings that run but far slower than people expect, or with noisy statistics: said once,
  /// before the first step.
  void print_warnings(const RunShape& run) const;
  /// One line on stderr (a warning that train_cifar formatted itself).
  void warn(const std::string& line) const;
  /// --eval-only's result, and its log record.
  void report_eval(const PassMetrics& test);
  /// --resume auto after the last epoch: nothing left to train.
  void print_nothing_to_train(int epochs_done) const;
  /// A log record of where the run saved or resumed (type "checkpoint" or "resume"); a resume
  /// also says the world size of the run it continues and its own (world_size_from, _to).
  void log_position(const char* type, const RunPosition& position, int from_world = 0);

  /// Starts the run's clock for the `epochs` this invocation will train.
  void start_clock(int epochs);
  /// The progress bar (or plain lines) of an epoch of `steps` starting at `first_step`; nothing
  /// where the report is disabled.
  std::optional<EpochProgress> epoch_progress(int epoch, int64_t steps, int64_t first_step) const;
  /// Marks the epoch done on the run's clock, then prints its line and writes its log record.
  /// step: the optimizer steps taken so far in the run.
  void report_epoch(int epoch, float lr, int64_t step, const PassMetrics& train,
                    const PassMetrics& test);
  void print_interrupted(int epoch) const;
  /// The last lines: why the run stopped early, its totals (and their log record), and what it
  /// wrote and how to go on from it.
  void print_summary(const RunSummary& summary, int last_epoch);

 private:
  /// What an interrupt leaves behind, for the line that reports it.
  std::string what_is_saved() const;
  void print_next_steps(const RunSummary& summary, int last_epoch) const;

  TrainOptions options_;
  int world_ = 1;
  bool enabled_ = false;
  MetricsLog log_;
  RunClock run_clock_;  ///< this invocation's time, for the whole run's time left
};

}  // namespace tandem::apps
