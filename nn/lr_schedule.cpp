#include "nn/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/error.h"

namespace tandem::nn {
namespace {

// From `start` to `end` along half a cosine as pct goes 0 → 1.
float cosine_anneal(float start, float end, double pct) {
  return static_cast<float>(end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0));
}

}  // namespace

MultiStepLr::MultiStepLr(float base_lr, std::vector<int64_t> milestones, float gamma)
    : base_lr_(base_lr), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
}

MultiStepLr MultiStepLr::paper(float base_lr, int64_t total_steps) {
  return MultiStepLr(base_lr, {total_steps / 2, total_steps * 3 / 4}, 0.1f);
}

float MultiStepLr::lr_at(int64_t step) const {
  const auto passed =
      std::upper_bound(milestones_.begin(), milestones_.end(), step) - milestones_.begin();
  return base_lr_ * std::pow(gamma_, static_cast<float>(passed));
}

CosineLr::CosineLr(float base_lr, int64_t total_steps, float min_lr)
    : base_lr_(base_lr), total_steps_(total_steps), min_lr_(min_lr) {
  TANDEM_CHECK(total_steps > 0, "[CosineLr] total_steps must be positive");
}

float CosineLr::lr_at(int64_t step) const {
  const double pct =
      std::clamp(static_cast<double>(step) / static_cast<double>(total_steps_), 0.0, 1.0);
  return cosine_anneal(base_lr_, min_lr_, pct);
}

OneCycleLr::OneCycleLr(float max_lr, int64_t total_steps, float pct_start, float div_factor,
                       float final_div_factor)
    : max_lr_(max_lr),
      total_steps_(total_steps),
      pct_start_(pct_start),
      initial_lr_(max_lr / div_factor),
      final_lr_(max_lr / div_factor / final_div_factor) {
  TANDEM_CHECK(total_steps > 1 && pct_start > 0.0f && pct_start < 1.0f,
               "[OneCycleLr] needs total_steps > 1 and 0 < pct_start < 1");
}

float OneCycleLr::lr_at(int64_t step) const {
  // PyTorch's phase ends: step pct_start·total − 1 reaches max, step total − 1 reaches the end.
  const double warm_end = static_cast<double>(pct_start_) * static_cast<double>(total_steps_) - 1.0;
  const double last = static_cast<double>(total_steps_ - 1);
  const double s = std::min(static_cast<double>(step), last);
  if (s <= warm_end) return cosine_anneal(initial_lr_, max_lr_, warm_end > 0 ? s / warm_end : 1.0);
  return cosine_anneal(max_lr_, final_lr_, (s - warm_end) / (last - warm_end));
}

WarmupLr::WarmupLr(std::shared_ptr<const LrSchedule> inner, int64_t warmup_steps,
                   float start_factor)
    : inner_(std::move(inner)), warmup_steps_(warmup_steps), start_factor_(start_factor) {
  TANDEM_CHECK(inner_ != nullptr && warmup_steps >= 0,
               "[WarmupLr] needs a schedule and warmup_steps >= 0");
}

float WarmupLr::lr_at(int64_t step) const {
  if (step >= warmup_steps_) return inner_->lr_at(step - warmup_steps_);
  const float factor = start_factor_ + (1.0f - start_factor_) * static_cast<float>(step) /
                                           static_cast<float>(warmup_steps_);
  return factor * inner_->lr_at(0);
}

}  // namespace tandem::nn
