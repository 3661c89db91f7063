#include "apps/train_cifar/run_report.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "apps/common/wording.h"
#include "apps/train_cifar/next_steps.h"
#include "engine/tandem.h"
#include "nn/checkpoint.h"

namespace tandem::apps {
namespace {

std::string thousands(int64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// --zero's stage: Sharding's values are ZeRO's stages in order (0 plain DDP, 1, 2).
int zero_stage(const TrainOptions& options) {
  return static_cast<int>(options.setup.ddp.sharding);
}

// Where the header says the run trains: its devices, or its ranks and how they reduce.
std::string where_it_runs(const TrainOptions& options, const RunShape& run) {
  const TrainingSetup& setup = *run.setup;
  if (options.setup.mode == Mode::DataParallel) {
    return std::to_string(setup.devices.size()) + " devices (" + device_list(setup.devices) + ")";
  }
  if (options.setup.mode != Mode::Distributed) return setup.device().str();
  return counted(run.world, "rank") + ", " + run.backend + " on " + setup.device().str() +
         (zero_stage(options) > 0
              ? detail::concat(", ZeRO stage ", zero_stage(options), " (",
                               parallel::sharding_name(options.setup.ddp.sharding), " sharded)")
              : "") +
         (options.setup.sync_bn ? ", SyncBatchNorm" : "") +
         (options.setup.grad_compression != parallel::GradCompression::None
              ? ", " +
                    std::string(parallel::grad_compression_name(options.setup.grad_compression)) +
                    " gradients"
              : "") +
         (run.shares.uneven ? ", uneven shares joined" : "");
}

// A resumed run appends; --overwrite, and --resume auto with nothing to resume (the job's own
// first attempt, or one killed before its first save), replace; any other run creates its log.
LogOpening log_opening(const TrainOptions& options, bool resumed) {
  if (resumed) return LogOpening::Append;
  if (options.overwrite || options.resume.automatic) return LogOpening::Replace;
  return LogOpening::Create;
}

// Batch-norm statistics come from each device's share of the batch, so a share of a few images
// is noisy, in one device's whole batch as in a rank's part of one. "" when the shares are large
// enough, or --sync-bn pools them.
std::string few_images_warning(const TrainOptions& options, int64_t sharers, bool ddp) {
  constexpr int64_t kFewImages = 8;
  const int64_t each = options.batch_size / sharers;
  if (each >= kFewImages || (sharers > 1 && options.setup.sync_bn)) return "";
  const std::string batch = "--batch-size " + std::to_string(options.batch_size);
  if (sharers == 1) {
    return "train_cifar: warning: " + batch + " is " + std::to_string(each) +
           " images on one device: batch-norm statistics of so few are noisy (raise --batch-size)";
  }
  return "train_cifar: warning: " + batch + " over " + counted(sharers, ddp ? "rank" : "device") +
         " is " + std::to_string(each) +
         " images each: batch-norm statistics of so few are noisy (" +
         (ddp ? "--sync-bn pools them, or raise --batch-size" : "raise --batch-size") + ")";
}

}  // namespace

RunReport::RunReport(const TrainOptions& options, int world, bool enabled, bool append_log)
    : options_(options),
      world_(world),
      enabled_(enabled),
      log_(enabled ? options.log_json : "", log_opening(options, append_log)) {}

void RunReport::print_header(const RunShape& run, const RunPosition& start) const {
  if (!enabled_) return;
  std::printf(
      "train_cifar: %s (%s parameters), mode %s on %s, global batch %lld, %s, lr %g "
      "%s, %s data: %s train / %s test images, %s, %s, %s\n",
      options_.setup.arch.c_str(), thousands(run.setup->network->parameter_count()).c_str(),
      mode_name(options_.setup.mode), where_it_runs(options_, run).c_str(),
      static_cast<long long>(options_.batch_size), counted(options_.epochs, "epoch").c_str(),
      static_cast<double>(options_.setup.sgd.lr), schedule_name(options_.schedule),
      options_.synthetic ? "synthetic" : "CIFAR-10", thousands(run.train_images).c_str(),
      thousands(run.test_images).c_str(), counted(num_threads(), "thread").c_str(),
      memory_format_name(run.setup->memory_format), nn::precision_name(options_.setup.precision));
  // Note [Resume at another world size]
  const std::string resized = run.saved_world == run.world
                                  ? ""
                                  : detail::concat(", saved by ", run.saved_world, " ranks, now ",
                                                   counted(run.world, "rank"));
  if (start.batch > 0) {
    std::printf("resuming in epoch %d at batch %lld of %lld (step %lld%s)\n", start.epoch + 1,
                static_cast<long long>(start.batch),
                static_cast<long long>(run.shares.batches_per_epoch),
                static_cast<long long>(start.step), resized.c_str());
  } else if (start.epoch > 0) {
    std::printf("resuming after epoch %d (step %lld%s)\n", start.epoch,
                static_cast<long long>(start.step), resized.c_str());
  }
  std::fflush(stdout);
}

// A run that works but disappoints is warned of before it starts: more busy threads than cores,
// or a device's batch (or its share of one) down to a few images, run (people try such things)
// but far slower than they expect, or with noisy batch-norm statistics.
void RunReport::print_warnings(const RunShape& run) const {
  if (!enabled_) return;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const bool ddp = options_.setup.mode == Mode::Distributed;
  const int local_ranks = ddp ? run.local_ranks : 1;
  const int threads = num_threads() * local_ranks;
  if (threads > cores) {
    const std::string who = ddp ? counted(local_ranks, "rank") + " × " +
                                      counted(num_threads(), "thread") + " on this machine"
                                : counted(threads, "thread");
    std::fprintf(stderr,
                 "train_cifar: warning: %s on %s: they take turns on the cores, so this runs "
                 "slower than %s would\n",
                 who.c_str(), counted(cores, "core").c_str(),
                 ddp ? "fewer ranks" : ("--threads " + std::to_string(cores)).c_str());
  }
  const int64_t sharers = ddp ? run.world : static_cast<int64_t>(run.setup->devices.size());
  const std::string few_images = few_images_warning(options_, sharers, ddp);
  if (!few_images.empty()) std::fprintf(stderr, "%s\n", few_images.c_str());
}

void RunReport::warn(const std::string& line) const {
  if (enabled_) std::fprintf(stderr, "%s\n", line.c_str());
}

void RunReport::report_eval(const PassMetrics& test) {
  if (!enabled_) return;
  std::printf("test: loss %.4f, accuracy %.2f%% on %lld images\n", test.loss, 100 * test.accuracy,
              static_cast<long long>(test.images));
  log_.write({{"type", "eval"}, {"test_loss", test.loss}, {"test_accuracy", test.accuracy}});
}

void RunReport::print_nothing_to_train(int epochs_done) const {
  if (!enabled_) return;
  std::printf("nothing to train: %s finished its %s\n", options_.save.c_str(),
              counted(epochs_done, "epoch").c_str());
}

// For the fault drills and plots: where a run saved or resumed, when, and in which attempt of a
// restarting launcher (TORCHELASTIC_RESTART_COUNT, set by tandem-run and torchrun).
void RunReport::log_position(const char* type, const RunPosition& position, int from_world) {
  if (!enabled_) return;
  const char* attempt = std::getenv("TORCHELASTIC_RESTART_COUNT");
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  nlohmann::json record{{"type", type},
                        {"epoch", position.epoch},
                        {"batch", position.batch},
                        {"step", position.step},
                        {"attempt", attempt != nullptr ? std::atoi(attempt) : 0},
                        {"unix_time", std::chrono::duration<double>(now).count()}};
  if (from_world > 0) {
    record["world_size_from"] = from_world;
    record["world_size_to"] = world_;
  }
  log_.write(record);
}

void RunReport::start_clock(int epochs) {
  run_clock_ = RunClock(epochs);
}

std::optional<EpochProgress> RunReport::epoch_progress(int epoch, int64_t steps,
                                                       int64_t first_step) const {
  if (!enabled_) return std::nullopt;
  return EpochProgress(
      {.epoch = epoch + 1,
       .epochs = options_.epochs,
       .steps = steps,
       .first_step = first_step,
       // Plain lines for --no-progress, a file or a pipe.
       .bar_columns = options_.progress ? progress_terminal_columns() : std::nullopt,
       .run = &run_clock_});
}

// The epoch's line, with the run's time so far and left while epochs remain, and its log record.
void RunReport::report_epoch(int epoch, float lr, int64_t step, const PassMetrics& train,
                             const PassMetrics& test) {
  run_clock_.epoch_done();
  if (!enabled_) return;
  const double images_per_second = static_cast<double>(train.images) / train.seconds;
  std::string run_time;
  if (const double left = run_clock_.left_between_epochs(); left > 0) {
    run_time = " | run " + format_duration(run_clock_.elapsed()) + ", about " +
               format_duration(left) + " left";
  }
  std::printf(
      "epoch %d/%d: train loss %.4f acc %.2f%% | test loss %.4f acc %.2f%% | %.1f s, "
      "%.0f img/s, lr %.4g%s\n",
      epoch + 1, options_.epochs, train.loss, 100 * train.accuracy, test.loss, 100 * test.accuracy,
      train.seconds, images_per_second, static_cast<double>(lr), run_time.c_str());
  std::fflush(stdout);
  log_.write({{"type", "epoch"},
              {"epoch", epoch + 1},
              {"train_loss", train.loss},
              {"train_accuracy", train.accuracy},
              {"test_loss", test.loss},
              {"test_accuracy", test.accuracy},
              {"seconds", train.seconds},
              {"host_reads", train.host_reads},
              {"images_per_second", images_per_second},
              {"lr", lr},
              {"step", step},
              {"mode", mode_name(options_.setup.mode)},
              {"precision", nn::precision_name(options_.setup.precision)},
              {"world_size", world_}});
}

void RunReport::print_interrupted(int epoch) const {
  if (!enabled_) return;
  std::printf("\ninterrupted during epoch %d; %s\n", epoch + 1, what_is_saved().c_str());
}

std::string RunReport::what_is_saved() const {
  if (options_.save.empty()) return "nothing was saved (no --save)";
  if (nn::has_checkpoint(options_.save)) return "the last checkpoint is intact";
  return options_.save_every_steps > 0
             ? "nothing was saved yet (--save writes every --save-every-steps steps and at the "
               "end of each epoch)"
             : "nothing was saved yet (--save writes at the end of each epoch)";
}

void RunReport::print_summary(const RunSummary& summary, int last_epoch) {
  if (!enabled_) return;
  if (!summary.interrupted && last_epoch < options_.epochs) {
    std::printf("stopped after epoch %d of %d (--run-epochs)\n", last_epoch, options_.epochs);
  }
  if (summary.epochs_done == 0) {
    std::printf("done: no epoch finished in this run\n");  // no accuracy to report as 0.00 %
  } else {
    std::printf(
        "done: %s, best test accuracy %.2f%%, last %.2f%%, %.1f s training, %.0f img/s, %.1f "
        "GFLOP/s (%.0f MFLOP per image per step)\n",
        counted(summary.epochs_done, "epoch").c_str(), 100 * summary.best_accuracy,
        100 * summary.last_accuracy, summary.train_seconds, summary.images_per_second,
        summary.images_per_second * summary.flops_per_image / 1e9, summary.flops_per_image / 1e6);
  }
  log_.write({{"type", "summary"},
              {"epochs_done", summary.epochs_done},
              {"best_test_accuracy", summary.best_accuracy},
              {"last_test_accuracy", summary.last_accuracy},
              {"train_seconds", summary.train_seconds},
              {"images_per_second", summary.images_per_second},
              {"flops_per_image", summary.flops_per_image},
              {"interrupted", summary.interrupted},
              {"mode", mode_name(options_.setup.mode)},
              {"world_size", world_},
              {"zero_stage", zero_stage(options_)},
              {"precision", nn::precision_name(options_.setup.precision)},
              {"arch", options_.setup.arch}});
  print_next_steps(summary, last_epoch);
}

// Note [What to do next]: the end of a run (finished, stopped by --run-epochs or interrupted)
// says what it wrote and how to go on from it, so that nobody has to guess the next command. The
// commands paste as they are (next_steps.h): the program's path, quoted paths, the run's data.
void RunReport::print_next_steps(const RunSummary& summary, int last_epoch) const {
  const std::string log = options_.log_json.empty() ? "" : shell_word(options_.log_json);
  if (!options_.save.empty() && nn::has_checkpoint(options_.save)) {
    std::printf("written:  %s and %s (the checkpoint)%s%s\n", shell_word(options_.save).c_str(),
                shell_word(nn::sidecar_path(options_.save)).c_str(),
                options_.log_json.empty() ? "" : ", metrics in ", log.c_str());
    const std::string again = continue_command(options_);
    if ((summary.interrupted || last_epoch < options_.epochs) && !again.empty()) {
      // Under a launcher of the user's own (tandem-run, torchrun), this is each rank's command.
      const bool launched = world_ > 1 && options_.nproc == 1;
      std::printf("continue: %s%s\n", launched ? "under the same launcher, " : "", again.c_str());
    }
    std::printf("evaluate: %s\n", evaluate_command(options_).c_str());
  }
  if (!options_.log_json.empty()) std::printf("plot:     %s\n", plot_command(options_).c_str());
  std::fflush(stdout);
}

}  // namespace tandem::apps
