#include "nn/grad_scaler.h"

#include <cmath>

#include "engine/ops/elementwise.h"
#include "engine/ops/factory.h"
#include "engine/ops/optim.h"
#include "engine/profiler.h"

namespace tandem::nn {
// PyTorch asserts the factors; the rest would make the scale meaningless (a damaged checkpoint).
void check_grad_scaler_state(const GradScalerState& state) {
  TANDEM_CHECK(std::isfinite(state.scale) && state.scale > 0.0f,
               "[GradScaler] the scale must be finite and > 0, got ", state.scale);
  TANDEM_CHECK(state.growth_factor > 1.0 && std::isfinite(state.growth_factor),
               "[GradScaler] growth_factor must be > 1, got ", state.growth_factor);
  TANDEM_CHECK(state.backoff_factor > 0.0 && state.backoff_factor < 1.0,
               "[GradScaler] backoff_factor must be in (0, 1), got ", state.backoff_factor);
  TANDEM_CHECK(state.growth_interval >= 1, "[GradScaler] growth_interval must be >= 1, got ",
               state.growth_interval);
  TANDEM_CHECK(state.growth_tracker >= 0, "[GradScaler] the growth tracker must be >= 0, got ",
               state.growth_tracker);
}

GradScaler::GradScaler(const GradScalerOptions& options)
    : enabled_(options.enabled),
      state_{.scale = options.init_scale,
             .growth_tracker = 0,
             .growth_factor = options.growth_factor,
             .backoff_factor = options.backoff_factor,
             .growth_interval = options.growth_interval} {
  if (enabled_) check_grad_scaler_state(state_);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  return enabled_ ? mul(loss, state_.scale) : loss;
}

void GradScaler::unscale(Optimizer& optimizer) {
  if (!enabled_) return;
  OptimizerStep& step = steps_[&optimizer];
  TANDEM_CHECK(step.stage != Stage::Unscaled,
               "[GradScaler] unscale() has already been called on this optimizer since the last "
               "update()");
  TANDEM_CHECK(step.stage != Stage::Stepped, "[GradScaler] unscale() is being called after step()");
  const profiler::RecordScope scope("GradScaler.unscale");
  const std::vector<Tensor> gradients = optimizer.gradients();
  const Device device = gradients.empty() ? Device::cpu() : gradients.front().device();
  step.found_inf = zeros({1}, {.device = device});
  // PyTorch's reciprocal in double, rounded once: 1.0f / scale may differ in the last bit.
  const auto inv_scale = static_cast<float>(1.0 / static_cast<double>(state_.scale));
  non_finite_check_and_unscale_(gradients, step.found_inf, inv_scale);
  agree_found_inf(step.found_inf);
  step.stage = Stage::Unscaled;
}

bool GradScaler::step(Optimizer& optimizer) {
  if (!enabled_) {
    optimizer.step();
    return true;
  }
  OptimizerStep& step = steps_[&optimizer];  // unordered_map: stays valid as entries are added
  TANDEM_CHECK(step.stage != Stage::Stepped,
               "[GradScaler] step() has already been called since the last update()");
  if (step.stage == Stage::Ready) unscale(optimizer);
  const bool skip = found_inf(step);
  if (skip) {
    ++skipped_steps_;
  } else {
    optimizer.step();
  }
  step.stage = Stage::Stepped;
  return !skip;
}

bool GradScaler::found_inf(OptimizerStep& step) {
  if (!step.found.has_value()) step.found = step.found_inf.item() != 0.0;
  return *step.found;
}

void GradScaler::update() {
  if (!enabled_) return;
  TANDEM_CHECK(!steps_.empty(),
               "[GradScaler] update() without an inf check: call step() (or unscale()) first");
  bool found = false;
  for (auto& [optimizer, step] : steps_) found = found_inf(step) || found;  // reads every flag
  // PyTorch's _amp_update_scale_, in the same arithmetic: double products rounded to float.
  if (found) {
    state_.scale = static_cast<float>(state_.scale * state_.backoff_factor);
    state_.growth_tracker = 0;
  } else if (state_.growth_tracker + 1 == state_.growth_interval) {
    const auto grown = static_cast<float>(state_.scale * state_.growth_factor);
    if (std::isfinite(grown)) state_.scale = grown;  // never grows to inf
    state_.growth_tracker = 0;
  } else {
    ++state_.growth_tracker;
  }
  steps_.clear();
}

std::optional<GradScalerState> GradScaler::state_dict() const {
  if (!enabled_) return std::nullopt;
  return state_;
}

void GradScaler::load_state_dict(const GradScalerState& state) {
  if (!enabled_) return;
  check_grad_scaler_state(state);
  state_ = state;
}

}  // namespace tandem::nn
