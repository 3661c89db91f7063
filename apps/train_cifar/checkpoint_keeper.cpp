#include "apps/train_cifar/checkpoint_keeper.h"

#include <filesystem>

#include "apps/common/output_paths.h"
#include "apps/train_cifar/saved_buckets.h"
#include "engine/tandem.h"
#include "nn/checkpoint.h"

namespace tandem::apps {

CheckpointKeeper::CheckpointKeeper(const TrainOptions& options,
                                   std::shared_ptr<parallel::ProcessGroup> group, RunReport& report,
                                   std::string resume_path)
    : options_(options),
      group_(std::move(group)),
      rank_(group_ ? group_->rank() : 0),
      world_(group_ ? group_->size() : 1),
      report_(report),
      resume_path_(std::move(resume_path)) {}

// Note [A resume knows its run]: the settings are checked before anything is loaded, so a
// wrong --arch is named as such, not as a missing key.
//
// Note [Resume at another world size]: a checkpoint resumes at any world size that splits its
// global batch (--batch-size may not change: Note [A resume knows its run]; validate() names the
// world sizes that split it), as the Trainer shares each epoch out over this run's ranks afresh
// (Trainer::make_train_sampler). In the middle of an epoch the position needs no translation:
// global step s holds the same images at any world size (Note [Global batches at any world size]
// in data/sampler.h), so "s batches of the epoch done" means the same images trained, the loader
// starts every rank at its batch s, and the learning rate stays a function of the global step,
// whose count per epoch does not depend on the world size either. What is not bit-identical to
// the job that kept its size: each rank's batch-norm statistics come from its own (now larger or
// smaller) share of the global batch (--sync-bn: from all of it, as before), and the average
// gradient is summed in another order. The mid-epoch metrics are sums over ranks, so the epoch's
// record is whole. Every rank loads the whole checkpoint, and a sharded optimizer (--zero) takes
// this run's part of its momentum when make_training_setup builds it, so the world size and the
// stage may both change at a resume. position_from() compares the batch layout at the saving
// run's world size.
void CheckpointKeeper::resume(nn::Module& network, nn::Sgd& optimizer) {
  if (resume_path_.empty()) return;
  const std::string& path = resume_path_;
  TANDEM_CHECK(!std::filesystem::is_directory(path), "[train_cifar] --resume ", path,
               " is a folder: name the checkpoint file that --save wrote (PATH, beside "
               "PATH.state)");
  if (options_.eval_only && !std::filesystem::exists(nn::sidecar_path(path))) {
    // Evaluation needs the weights alone: a checkpoint without its .state, or weights a
    // PyTorch model saved with safetensors under the same names, evaluate too.
    nn::load_state_dict(network, nn::load_safetensors(path).tensors);
    return;
  }
  // The settings of the pair that loads: a sidecar of another save, or an unreadable one, is
  // load_checkpoint()'s to name (or to fall back from), not a difference of settings.
  const std::vector<std::string> warnings =
      check_resume_settings(nn::loadable_metadata(path), options_, path);
  const nn::TrainingState state = nn::load_checkpoint(path, network, optimizer);
  if (!state.fell_back_because.empty()) {
    report_.warn("train_cifar: " + path + " was unusable (" + state.fell_back_because +
                 "); resuming from " + nn::previous_path(path) + ", one save earlier");
  }
  start_ = position_from(state, options_, world_, path);
  resumed_ = state.extra;
  for (const std::string& warning : warnings) report_.warn(warning);  // nothing refuses it now
}

int CheckpointKeeper::resumed_world_size() const {
  return saved_world_size(resumed_, world_);
}

void CheckpointKeeper::restore_buckets(const TrainingSetup& setup) const {
  restore_bucket_order(resumed_, setup, resume_path_);
}

void CheckpointKeeper::check_ranks_resume_alike() {
  if (!group_ || world_ == 1) return;
  // float32 holds every epoch, batch and step below 2^24 exactly.
  Tensor position = from_vector(std::vector<float>{static_cast<float>(start_.epoch),
                                                   static_cast<float>(start_.batch),
                                                   static_cast<float>(start_.step)},
                                {3})
                        .to(group_->tensor_device());
  group_->broadcast({position}, 0)->wait();
  const std::vector<float> leader = position.to_vector<float>();
  TANDEM_CHECK(leader[0] == static_cast<float>(start_.epoch) &&
                   leader[1] == static_cast<float>(start_.batch) &&
                   leader[2] == static_cast<float>(start_.step),
               "[train_cifar] rank ", rank_, " would start at epoch ", start_.epoch + 1, ", batch ",
               start_.batch, " but rank 0 at epoch ", leader[0] + 1, ", batch ", leader[1],
               ": every rank must see the same checkpoint (a shared file system, or a "
               "copy on every machine)");
}

// Note [New run, old checkpoint]: a run without --resume whose --save holds a checkpoint would
// replace another run's work (kept one save longer as PATH.prev, then gone), so it is refused
// unless --overwrite says that is meant: a refusal costs one flag, a warning scrolled past costs
// the trained model. Lightning warns instead, but names its checkpoints by epoch, so it replaces
// nothing. --resume auto continues the checkpoint, so it is never refused.
void CheckpointKeeper::check_outputs(const nn::Module& network) {
  if (rank_ != 0 || options_.save.empty()) return;
  const std::string& save = options_.save;
  uint64_t pair_bytes = 0;  // weights and buffers, and the momentum of the parameters
  for (const auto& [name, tensor] : network.state_dict()) {
    pair_bytes += static_cast<uint64_t>(tensor.numel()) * 4;
  }
  pair_bytes += static_cast<uint64_t>(network.parameter_count()) * 4;
  uint64_t held = 0;  // the files a save replaces
  for (const std::string& file : {save, nn::previous_path(save)}) {
    check_replaceable("train_cifar", "--save", file);
    check_replaceable("train_cifar", "--save", nn::sidecar_path(file));
    held += existing_file_bytes(file) + existing_file_bytes(nn::sidecar_path(file));
  }
  check_output_path("train_cifar", "--save", save, 2 * pair_bytes, held);
  // Locked first, so that a run still writing there is named as such.
  save_lock_ = std::make_unique<OutputLock>("train_cifar", "--save", save);
  TANDEM_CHECK(resumes() || options_.overwrite || !nn::has_checkpoint(save),
               "[train_cifar] --save ", save,
               " holds the checkpoint of an earlier run, which this run would replace: add "
               "--resume auto to continue it, or --overwrite to start afresh over it");
}

bool CheckpointKeeper::mid_epoch_save_due(int64_t step, int64_t batches_done,
                                          const EpochShares& shares) const {
  // Only between optimizer steps, never inside an --accumulate group; the last batch's save is
  // the epoch's own; under a Join, a rank that has joined cannot meet the others' barrier.
  return options_.save_every_steps > 0 && batches_done % options_.accumulate == 0 &&
         step % options_.save_every_steps == 0 && batches_done < shares.batches_per_epoch &&
         (!shares.uneven || batches_done < shares.batches_all_ranks_have);
}

// Note [Saving on every rank]: every rank calls save() at the same step, though rank 0 alone
// writes, so that a save can be a collective: the barrier keeps any rank from reading the files
// before they are complete, and a sharded optimizer (ZeRO, --zero) gathers its state to rank 0
// here, before the write, with every rank taking part (--zero 3 the weights too, on every rank,
// as FSDP's full state dict is gathered unit by unit); the file stays the format of plain DDP
// (Note [Sharded data parallel], checkpoints).
void CheckpointKeeper::save(const RunPosition& position, const TrainingSetup& setup) {
  if (options_.save.empty()) return;
  const std::unique_ptr<nn::Sgd> gathered =
      setup.sharded ? setup.sharded->consolidated(0) : nullptr;
  const parallel::GatheredParameters whole = setup.whole_network();  // --zero 3's weights
  if (rank_ == 0) {
    nn::TrainingState state = training_state_at(position, options_, world_);
    record_bucket_order(setup, state.extra);
    nn::save_checkpoint(options_.save, *setup.network, gathered ? *gathered : *setup.optimizer,
                        state);
    report_.log_position("checkpoint", position);
  }
  if (group_) group_->barrier()->wait();
}

}  // namespace tandem::apps
