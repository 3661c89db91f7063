// Trainer's checkpoints: resuming (from an epoch boundary or the middle of an epoch), agreeing
// on where every rank resumes, and saving (Note [Mid-epoch checkpoints] in run_position.h).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "apps/common/output_paths.h"
#include "apps/train_cifar/trainer.h"
#include "engine/tandem.h"
#include "nn/checkpoint.h"

namespace tandem::apps {

// Note [A resume knows its run]: the settings are checked before anything is loaded, so a
// wrong --arch is named as such, not as a missing key.
void Trainer::resume(const std::string& path, nn::Module& network, nn::Sgd& optimizer) {
  TANDEM_CHECK(!std::filesystem::is_directory(path), "[train_cifar] --resume ", path,
               " is a folder: name the checkpoint file that --save wrote (PATH, beside "
               "PATH.state)");
  if (options_.eval_only && !std::filesystem::exists(nn::sidecar_path(path))) {
    // Evaluation needs the weights alone: a checkpoint without its .state, or weights a
    // PyTorch model saved with safetensors under the same names, evaluate too.
    nn::load_state_dict(network, nn::load_safetensors(path).tensors);
    return;
  }
  nn::Metadata saved;
  try {
    saved = nn::load_safetensors(nn::sidecar_path(path)).metadata;
  } catch (const Error&) {
    // Unreadable: load_checkpoint() below says why, or falls back to the previous pair.
  }
  const std::vector<std::string> warnings = check_resume_settings(saved, options_, path);
  const nn::TrainingState state = nn::load_checkpoint(path, network, optimizer);
  if (!state.fell_back_because.empty() && is_leader()) {
    std::fprintf(stderr, "train_cifar: %s was unusable (%s); resuming from %s, one save earlier\n",
                 path.c_str(), state.fell_back_because.c_str(), nn::previous_path(path).c_str());
  }
  start_ = position_from(state, options_, world_, path);
  step_ = start_.step;
  for (const std::string& warning : warnings) {  // once nothing can refuse the resume any more
    if (is_leader()) std::fprintf(stderr, "%s\n", warning.c_str());
  }
}

void Trainer::check_ranks_resume_alike() {
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

void Trainer::save_checkpoint(const RunPosition& position) {
  if (options_.save.empty()) return;
  if (is_leader()) {
    nn::save_checkpoint(options_.save, *setup_.network, *setup_.optimizer,
                        training_state_at(position, options_, world_));
    log_position("checkpoint", position);
  }
  if (group_) group_->barrier()->wait();  // no rank reads it before it is complete
}

void Trainer::check_outputs() const {
  if (!options_.save.empty()) {
    uint64_t pair_bytes = 0;  // weights and buffers, and the momentum of the parameters
    for (const auto& [name, tensor] : setup_.network->state_dict()) {
      pair_bytes += static_cast<uint64_t>(tensor.numel()) * 4;
    }
    pair_bytes += static_cast<uint64_t>(setup_.network->parameter_count()) * 4;
    uint64_t held = 0;  // the files a save replaces
    for (const std::string& file : {options_.save, nn::previous_path(options_.save)}) {
      held += existing_file_bytes(file) + existing_file_bytes(nn::sidecar_path(file));
    }
    check_output_path("train_cifar", "--save", options_.save, 2 * pair_bytes, held);
  }
}

bool Trainer::mid_epoch_save_due(int64_t batches_done) const {
  // The last batch's save is the epoch's own; under a Join, a rank that has joined cannot
  // meet the others' barrier.
  return options_.save_every_steps > 0 && step_ % options_.save_every_steps == 0 &&
         batches_done < batches_per_epoch_ &&
         (!uneven_shares_ || batches_done < batches_all_ranks_have_);
}

// For the fault drills and plots: where a run saved or resumed (type "checkpoint" or "resume"),
// when, and in which attempt of a restarting launcher (TORCHELASTIC_RESTART_COUNT, set by
// tandem-run and torchrun).
void Trainer::log_position(const char* type, const RunPosition& position) {
  const char* attempt = std::getenv("TORCHELASTIC_RESTART_COUNT");
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  log_.write({{"type", type},
              {"epoch", position.epoch},
              {"batch", position.batch},
              {"step", position.step},
              {"attempt", attempt != nullptr ? std::atoi(attempt) : 0},
              {"unix_time", std::chrono::duration<double>(now).count()}});
}

}  // namespace tandem::apps
