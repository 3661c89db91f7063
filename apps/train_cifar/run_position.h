#pragma once
/// Where a train_cifar run stands in its schedule, as its checkpoints record it.
///
/// Note [Mid-epoch checkpoints]: with --save-every-steps K a run also saves after every K-th
/// optimizer step, between two batches of an epoch, so a fault costs at most K steps instead of
/// the epoch in progress. Such a checkpoint holds, beside the weights and the momentum, the epoch
/// in progress, the batches of it already trained and the step; that is the whole of the
/// training state, because everything random in a run is a function of the seed and the
/// position: the sampler's order of (seed, epoch), each image's augmentation of (seed, epoch,
/// image) (Note [Loader determinism]), the learning rate of the step. So a resume that starts the
/// loader at that batch gives exactly the batches, augmentations and updates the uninterrupted
/// run would have given, and ends with bit-identical weights (on the CPU, whose kernels are
/// deterministic; at any rank count, as a ddp checkpoint also carries the gradient buckets' order,
/// Note [Bucket order on resume] in parallel/reducer_buckets.cpp). Saves fall
/// only between optimizer steps (never inside an --accumulate group), in ddp on every rank after
/// the same step (K counts the run's steps, which every rank takes together), and with uneven
/// shares (Note [Join protocol]) only while no rank has joined. The epoch's training metrics so
/// far go with it, summed over the ranks, so the epoch's line and log record are whole too.
///
/// The batches mean the same only with the same batch layout: a mid-epoch checkpoint records
/// the global batch, the ranks, --accumulate, --subset, --drop-last and the seed, and a resume
/// with other values is refused (one line); an epoch-boundary checkpoint resumes with any. Other
/// ranks (the same global batch) resume it too: Note [Resume at another world size] in
/// checkpoint_keeper.cpp.

#include <cstdint>
#include <string>
#include <vector>

#include "apps/train_cifar/train_options.h"
#include "nn/checkpoint.h"

namespace tandem::apps {

/// An epoch's training metrics up to some batch, over every rank.
struct EpochSoFar {
  double loss_sum = 0;  ///< Σ loss × images
  double correct = 0;
  int64_t images = 0;
  double seconds = 0;  ///< of training, on rank 0
};

/// How an epoch's batches are shared over the ranks (Trainer::make_train_sampler): what the LR
/// schedule, the header and the mid-epoch save cadence depend on.
struct EpochShares {
  int64_t local_batch = 0;  ///< each rank's part of --batch-size
  /// ddp without --drop-last on data that does not divide over the ranks: the ranks with fewer
  /// batches join (parallel::Join) instead of padding, unless SyncBatchNorm or --accumulate
  /// forbid it.
  bool uneven = false;
  int64_t batches_per_epoch = 0;       ///< of the rank with the most (they set the schedule)
  int64_t batches_all_ranks_have = 0;  ///< of the rank with the fewest
};

struct RunPosition {
  int epoch = 0;      ///< epochs completed: the epoch in progress, counting from 0
  int64_t batch = 0;  ///< batches of that epoch already trained; 0 at an epoch boundary
  int64_t step = 0;   ///< optimizer steps taken over the whole run (the LR schedule's clock)
  EpochSoFar so_far{};
};

/// The checkpoint a run resumes from: --resume's path (PATH for PATH.state, the pair's sidecar);
/// for `--resume auto`, automatic_resume_source(--save); "" without --resume.
std::string resume_source(const TrainOptions& options);

/// --resume auto's checkpoint: `save` when it holds a complete checkpoint (nn::has_checkpoint),
/// "" (start afresh) when no save ever completed there, as a restarted worker needs; throws one
/// line naming the file and why when a checkpoint is there but neither it nor the previous pair
/// loads (Note [Resume auto never starts over] in run_position.cpp).
std::string automatic_resume_source(const std::string& save);

/// The checkpoint's training state for `position` (its extra metadata also names the run: arch,
/// mode, precision, and for a mid-epoch position its batch layout).
nn::TrainingState training_state_at(const RunPosition& position, const TrainOptions& options,
                                    int world_size);

/// Note [A resume knows its run]: every checkpoint also records the settings that shape the
/// run's learning-rate schedule and data (--epochs, --batch-size, --schedule, --lr,
/// --warmup-epochs, --accumulate, --subset, --drop-last, --seed). Before anything is loaded,
/// check_resume_settings() refuses another --arch and any change that would give the resumed
/// steps another schedule (a bigger batch or another schedule would otherwise resume past the end
/// of the new one and train at lr 0), naming the saved values; it lets --epochs grow or shrink
/// and --seed change, with a warning line each (a longer run stretches the schedule, as PyTorch
/// users who raise the epoch count expect to continue). Checkpoints from before the record are
/// checked for --arch only. Returns the warnings to print.
std::vector<std::string> check_resume_settings(const nn::Metadata& saved,
                                               const TrainOptions& options,
                                               const std::string& path);

/// The world size of the run that wrote a checkpoint with training-state metadata `extra`;
/// `otherwise` for checkpoints from before it was recorded.
int saved_world_size(const nn::Metadata& extra, int otherwise);

/// The position `state` (loaded from `path`) records. Throws a one-line tandem::Error when a
/// mid-epoch checkpoint was written with another batch layout than `options` (the world size
/// aside where the checkpoint records its own: Note [Resume at another world size]).
RunPosition position_from(const nn::TrainingState& state, const TrainOptions& options,
                          int world_size, const std::string& path);

}  // namespace tandem::apps
