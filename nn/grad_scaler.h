#pragma once
/// GradScaler: dynamic loss scaling for float16 training, PyTorch's torch.amp.GradScaler with its
/// defaults and rules (Note [Gradient scaling]).
///
///   nn::GradScaler scaler;                        // 2^16, x2 every 2,000 clean steps, x0.5
///   optimizer.zero_grad();
///   scaler.scale(loss).backward();                // scaled gradients
///   scaler.unscale(optimizer);                    // optional: true gradients from here on
///   scaler.step(optimizer);                       // skipped when a gradient is inf or NaN
///   scaler.update();                              // the next step's scale
///
/// One process, whatever its devices (DataParallel: an optimizer over the master model). Under
/// DistributedDataParallel and sharded data parallel use parallel::DistributedGradScaler, which
/// makes every rank skip the same steps. The scale and its counter go into checkpoints through
/// state_dict() (TrainingState::grad_scaler in checkpoint.h).
///
/// Note [Gradient scaling]: float16's smallest normal value is 6e-5, so small gradients computed
/// in it underflow to zero. Multiplying the loss by a large scale moves every gradient up by the
/// same factor; dividing the float32 master gradients by it before the step gives the true ones.
/// A scale too large overflows instead, which shows as inf or NaN in some gradient: that step is
/// skipped (its update would destroy the weights) and the scale halves. After growth_interval
/// steps in a row without one, the scale doubles again, so it stays near the largest that does
/// not overflow. The rules are PyTorch's exactly (its _amp_update_scale_ kernel):
/// - a step with inf/NaN: scale *= backoff_factor, growth tracker = 0;
/// - a clean step: tracker + 1; when that reaches growth_interval, scale *= growth_factor
///   (kept as it was if that is inf) and tracker = 0;
/// - products computed in double and rounded to float, as the kernel does.
/// The scale is a host float, not a device tensor as in PyTorch: PyTorch keeps it on the device so
/// that update() never waits, but its step() reads the found-inf flag on the host anyway (to
/// skip or not), and so does this one's, once per optimizer and step; after that read nothing
/// is left to wait for.

#include <optional>
#include <unordered_map>

#include "engine/tensor.h"
#include "nn/optimizer.h"

namespace tandem::nn {

struct GradScalerOptions {
  float init_scale = 65536.0f;     ///< 2^16
  double growth_factor = 2.0;      ///< > 1
  double backoff_factor = 0.5;     ///< in (0, 1)
  int64_t growth_interval = 2000;  ///< clean steps in a row before the scale grows; >= 1
  /// false: scale() returns the loss as it is, step() steps, the rest does nothing (PyTorch's
  /// `enabled=False`), so one training loop serves both.
  bool enabled = true;
};

/// What a checkpoint keeps of a scaler: PyTorch's GradScaler.state_dict() (its keys "scale",
/// "_growth_tracker", "growth_factor", "backoff_factor", "growth_interval").
struct GradScalerState {
  float scale = 65536.0f;
  int64_t growth_tracker = 0;  ///< clean steps in a row since the scale last changed
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;

  bool operator==(const GradScalerState&) const = default;
};

/// Throws unless `state` is one a scaler can run with (a finite scale > 0, growth_factor > 1,
/// backoff_factor in (0, 1), growth_interval >= 1, tracker >= 0): what GradScaler checks its
/// options and a loaded state against, and a checkpoint its sidecar before loading anything.
void check_grad_scaler_state(const GradScalerState& state);

class GradScaler {
 public:
  explicit GradScaler(const GradScalerOptions& options = {});
  virtual ~GradScaler() = default;
  GradScaler(const GradScaler&) = delete;
  GradScaler& operator=(const GradScaler&) = delete;

  /// loss * scale (differentiable); the loss itself when disabled.
  Tensor scale(const Tensor& loss) const;
  /// Divides `optimizer`'s gradients (Optimizer::gradients()) by the scale in place and records
  /// whether any was inf or NaN, without waiting for the device. The gradients must share one
  /// device (a DDP rank's do, and DataParallel's master's). Once per optimizer between
  /// update()s, after the last backward of the step; step() calls it when it was not. Between
  /// the two the gradients are the true ones: clip or inspect them there.
  void unscale(Optimizer& optimizer);
  /// optimizer.step(), unless unscale() found an inf or NaN (reads that flag on the host).
  /// Returns whether it stepped; when disabled, steps and returns true.
  bool step(Optimizer& optimizer);
  /// Backs the scale off or grows it from what this step's unscale() calls found (rules in Note
  /// [Gradient scaling]), and starts the next step. Needs an unscale() or step() before it.
  void update();

  bool is_enabled() const { return enabled_; }
  /// The scale the next scale() multiplies by; 1 when disabled.
  float get_scale() const { return enabled_ ? state_.scale : 1.0f; }
  /// Clean steps in a row since the scale last changed.
  int64_t growth_tracker() const { return state_.growth_tracker; }
  /// Optimizer steps that step() skipped for inf or NaN since construction (not checkpointed).
  int64_t skipped_steps() const { return skipped_steps_; }

  /// The state to checkpoint; none when disabled (PyTorch's state_dict() is then empty).
  std::optional<GradScalerState> state_dict() const;
  /// Restores a state_dict(), settings included, as PyTorch's load_state_dict(); nothing when
  /// disabled. Checked before anything changes.
  void load_state_dict(const GradScalerState& state);

 protected:
  /// Called by unscale() with this process's flag (float32, one element: 1 when a gradient it
  /// checked was inf or NaN, else 0). A scaler shared by processes makes it the verdict of all
  /// of them (parallel::DistributedGradScaler); one process has nothing to agree with.
  virtual void agree_found_inf(Tensor& /*found_inf*/) {}

 private:
  /// Where an optimizer is in the current step (PyTorch's OptState).
  enum class Stage { Ready, Unscaled, Stepped };
  struct OptimizerStep {
    Stage stage = Stage::Ready;
    Tensor found_inf;           ///< unscale()'s flag, until read
    std::optional<bool> found;  ///< the flag, once read on the host
  };
  /// The flag of an unscaled optimizer, read on the host once.
  static bool found_inf(OptimizerStep& step);

  bool enabled_;
  GradScalerState state_;
  int64_t skipped_steps_ = 0;
  /// Per optimizer (by address) unscaled or stepped since the last update().
  std::unordered_map<const Optimizer*, OptimizerStep> steps_;
};

}  // namespace tandem::nn
