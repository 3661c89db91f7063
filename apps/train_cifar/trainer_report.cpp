// Trainer's report: the header, the end-of-run summary and what to do next.
#include <algorithm>
#include <cstdio>
#include <thread>

#include "apps/common/wording.h"
#include "apps/train_cifar/progress.h"
#include "apps/train_cifar/trainer.h"
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

}  // namespace

void Trainer::print_header() {
  if (!is_leader()) return;
  std::string where;
  if (options_.mode == Mode::DataParallel) {
    where =
        std::to_string(setup_.devices.size()) + " devices (" + device_list(setup_.devices) + ")";
  } else if (options_.mode == Mode::Distributed) {
    where = counted(world_, "rank") + ", " + group_->backend_name() + " on " +
            setup_.device().str() + (options_.sync_bn ? ", SyncBatchNorm" : "") +
            (options_.grad_compression != parallel::GradCompression::None
                 ? ", " + std::string(parallel::grad_compression_name(options_.grad_compression)) +
                       " gradients"
                 : "") +
            (uneven_shares_ ? ", uneven shares joined" : "");
  } else {
    where = setup_.device().str();
  }
  std::printf(
      "train_cifar: %s (%s parameters), mode %s on %s, global batch %lld, %s, lr %g "
      "%s, %s data: %s train / %s test images, %s, %s, %s\n",
      options_.arch.c_str(), thousands(setup_.network->parameter_count()).c_str(),
      mode_name(options_.mode), where.c_str(), static_cast<long long>(options_.batch_size),
      counted(options_.epochs, "epoch").c_str(), static_cast<double>(options_.lr),
      schedule_name(options_.schedule), options_.synthetic ? "synthetic" : "CIFAR-10",
      thousands(train_set_->size()).c_str(), thousands(test_set_->size()).c_str(),
      counted(num_threads(), "thread").c_str(), memory_format_name(setup_.memory_format),
      nn::precision_name(options_.precision));
  if (start_.batch > 0) {
    std::printf("resuming in epoch %d at batch %lld of %lld (step %lld)\n", start_.epoch + 1,
                static_cast<long long>(start_.batch), static_cast<long long>(batches_per_epoch_),
                static_cast<long long>(step_));
  } else if (start_.epoch > 0) {
    std::printf("resuming after epoch %d (step %lld)\n", start_.epoch,
                static_cast<long long>(step_));
  }
  std::fflush(stdout);
}

// The UX review's cases 41 and 42: more busy threads than cores, or a rank's share of the batch
// down to a few images, run (people try such things) but far slower than they expect, or with
// noisy batch-norm statistics; rank 0 says so once, before the first step.
void Trainer::print_warnings() const {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const bool ddp = options_.mode == Mode::Distributed;
  const int local_ranks = ddp ? local_ranks_ : 1;
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
  const int64_t sharers = ddp ? world_ : static_cast<int64_t>(setup_.devices.size());
  constexpr int64_t kFewImages = 8;
  if (sharers > 1 && options_.batch_size / sharers < kFewImages && !options_.sync_bn) {
    std::fprintf(stderr,
                 "train_cifar: warning: --batch-size %lld over %s is %lld images each: batch-norm "
                 "statistics of so few are noisy (%s)\n",
                 static_cast<long long>(options_.batch_size),
                 counted(sharers, ddp ? "rank" : "device").c_str(),
                 static_cast<long long>(options_.batch_size / sharers),
                 ddp ? "--sync-bn pools them, or raise --batch-size" : "raise --batch-size");
  }
}

// The epoch's line, with the run's time so far and left while epochs remain, and its log record.
void Trainer::report_epoch(int epoch, float lr, const PassMetrics& train, const PassMetrics& test) {
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
              {"step", step_},
              {"mode", mode_name(options_.mode)},
              {"precision", nn::precision_name(options_.precision)},
              {"world_size", world_}});
}

// What an interrupt leaves behind, for the line that reports it.
std::string Trainer::what_is_saved() const {
  if (options_.save.empty()) return "nothing was saved (no --save)";
  if (nn::has_checkpoint(options_.save)) return "the last checkpoint is intact";
  return options_.save_every_steps > 0
             ? "nothing was saved yet (--save writes every --save-every-steps steps and at the "
               "end of each epoch)"
             : "nothing was saved yet (--save writes at the end of each epoch)";
}

void Trainer::print_summary(const RunSummary& summary, int last_epoch) {
  if (is_leader() && !summary.interrupted && last_epoch < options_.epochs) {
    std::printf("stopped after epoch %d of %d (--run-epochs)\n", last_epoch, options_.epochs);
  }
  {
    if (summary.epochs_done == 0) {
      std::printf("done: no epoch finished in this run\n");  // no accuracy to report as 0.00 %
    } else {
      std::printf("done: %s, best test accuracy %.2f%%, last %.2f%%, %.1f s training, %.0f img/s\n",
                  counted(summary.epochs_done, "epoch").c_str(), 100 * summary.best_accuracy,
                  100 * summary.last_accuracy, summary.train_seconds, summary.images_per_second);
    }
    log_.write({{"type", "summary"},
                {"epochs_done", summary.epochs_done},
                {"best_test_accuracy", summary.best_accuracy},
                {"last_test_accuracy", summary.last_accuracy},
                {"train_seconds", summary.train_seconds},
                {"images_per_second", summary.images_per_second},
                {"interrupted", summary.interrupted},
                {"mode", mode_name(options_.mode)},
                {"world_size", world_},
                {"precision", nn::precision_name(options_.precision)},
                {"arch", options_.arch}});
  }
  print_next_steps(summary, last_epoch);
}

// Note [What to do next]: the end of a run (finished, stopped by --run-epochs or interrupted)
// says what it wrote and how to go on from it, as the review of a newcomer's first run asked.
void Trainer::print_next_steps(const RunSummary& summary, int last_epoch) const {
  if (!options_.save.empty() && nn::has_checkpoint(options_.save)) {
    std::printf("written: %s and %s (the checkpoint)%s%s\n", options_.save.c_str(),
                nn::sidecar_path(options_.save).c_str(),
                options_.log_json.empty() ? "" : ", metrics in ", options_.log_json.c_str());
    if (summary.interrupted || last_epoch < options_.epochs) {
      std::printf("continue: the same command with --resume %s\n", options_.save.c_str());
    }
    std::printf("evaluate: train_cifar --arch %s --eval-only --resume %s\n", options_.arch.c_str(),
                options_.save.c_str());
  }
  if (!options_.log_json.empty()) {
    std::printf("plot:     scripts/plot_training.py %s\n", options_.log_json.c_str());
  }
  std::fflush(stdout);
}

}  // namespace tandem::apps
