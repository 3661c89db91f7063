#pragma once
/// Checkpoints that resume exactly. Two files:
/// - `path`: weights and buffers in safetensors, with state_dict names, so PyTorch users can
///   `model.load_state_dict(safetensors.torch.load_file(path))`;
/// - `path + ".state"` (the sidecar, also safetensors): the optimizer's momentum buffers, named
///   "momentum.<parameter name>", and the training state as metadata (a gradient scaler's state
///   under "grad_scaler.*" keys, when the run has one: Note [Scaler in the sidecar]).
/// Both carry the same random checkpoint id; loading refuses a pair from different saves.
///
/// Note [Checkpoint atomicity]: each file is written to a temporary and renamed, so neither is
/// ever half-written. The two renames are not one atomic step, so before them the complete pair
/// already there is kept as `path.prev` and `path.prev.state` (hard links, no copy): a crash
/// between the two renames leaves a new sidecar beside the old weights, which the id check
/// refuses, and load_checkpoint() then falls back to the previous pair, one save older, and
/// says so. At every moment one of the two pairs is complete.

#include <optional>
#include <string>

#include "nn/grad_scaler.h"
#include "nn/safetensors.h"
#include "nn/sgd.h"

namespace tandem::nn {

struct TrainingState {
  int64_t epoch = 0;        ///< epochs completed
  int64_t step = 0;         ///< optimizer steps taken (LR schedules are functions of it)
  std::string rng_state{};  ///< Generator::state() of the run's generator
  Metadata extra{};         ///< anything else the caller wants back (architecture, flags)
  /// GradScaler::state_dict() of a run that scales its loss; none otherwise, and when loaded from
  /// a checkpoint saved without one (which loads as before).
  std::optional<GradScalerState> grad_scaler{};
  /// Set by load_checkpoint() when `path` was unusable and the previous pair was loaded: why.
  std::string fell_back_because{};
};

void save_checkpoint(const std::string& path, const Module& model, const Sgd& optimizer,
                     const TrainingState& state);

/// Restores the model's parameters and buffers and the optimizer's momentum in place, and returns
/// the training state. The optimizer must be built over model.parameters(). Everything is checked
/// before anything is changed.
TrainingState load_checkpoint(const std::string& path, Module& model, Sgd& optimizer);

/// Whether load_checkpoint(path) has a complete pair to load: `path`'s, or the previous one. An
/// interrupted first save leaves neither (`--resume auto` then starts afresh).
bool has_checkpoint(const std::string& path);

/// Why the pair at `path` (itself, not the previous one) cannot load: "PATH is missing", the
/// reader's one line for a damaged file, or "PATH and PATH.state come from different saves";
/// "" when it can.
std::string checkpoint_problem(const std::string& path);

/// The sidecar's metadata (the training state and the caller's extra keys) of the pair that
/// load_checkpoint(path) loads: `path`'s when its two files come from one save, else the previous
/// pair's; empty when neither is whole. What a caller checks its settings against, so that a
/// sidecar of another save is named as such by load_checkpoint(), not as other settings.
Metadata loadable_metadata(const std::string& path);

std::string sidecar_path(const std::string& path);
/// Where save_checkpoint() keeps the previous complete pair: `path.prev` (+ `.state`).
std::string previous_path(const std::string& path);

}  // namespace tandem::nn
