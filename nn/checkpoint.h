#pragma once
/// Checkpoints that resume exactly. Two files:
/// - `path`: weights and buffers in safetensors, with state_dict names, so PyTorch users can
///   `model.load_state_dict(safetensors.torch.load_file(path))`;
/// - `path + ".state"` (the sidecar, also safetensors): the optimizer's momentum buffers, named
///   "momentum.<parameter name>", and the training state as metadata.
/// Both carry the same random checkpoint id; loading refuses a pair from different saves.
///
/// Note [Checkpoint atomicity]: each file is written to a temporary and renamed, so neither is
/// ever half-written. The two renames are not one atomic step: a crash between them leaves a new
/// sidecar beside the old weights, which the id check reports instead of resuming wrongly.

#include <string>

#include "nn/safetensors.h"
#include "nn/sgd.h"

namespace tandem::nn {

struct TrainingState {
  int64_t epoch = 0;      ///< epochs completed
  int64_t step = 0;       ///< optimizer steps taken (LR schedules are functions of it)
  std::string rng_state{};  ///< Generator::state() of the run's generator
  Metadata extra{};         ///< anything else the caller wants back (architecture, flags)
};

void save_checkpoint(const std::string& path, const Module& model, const Sgd& optimizer,
                     const TrainingState& state);

/// Restores the model's parameters and buffers and the optimizer's momentum in place, and returns
/// the training state. The optimizer must be built over model.parameters(). Everything is checked
/// before anything is changed.
TrainingState load_checkpoint(const std::string& path, Module& model, Sgd& optimizer);

std::string sidecar_path(const std::string& path);

}  // namespace tandem::nn
