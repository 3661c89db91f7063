#pragma once
/// Learning-rate schedules as pure functions of the optimizer step, so they work
/// for any batch size and resume exactly from a step number.

#include <cstdint>
#include <memory>
#include <vector>

namespace tandem::nn {

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  /// The learning rate for optimizer step `step` (0-based).
  virtual float lr_at(int64_t step) const = 0;
};

/// base × gamma^(number of milestones <= step) (torch MultiStepLR).
class MultiStepLr final : public LrSchedule {
 public:
  MultiStepLr(float base_lr, std::vector<int64_t> milestones, float gamma = 0.1f);
  /// He et al.'s CIFAR schedule: ÷10 at 50 % and 75 % of training.
  static MultiStepLr paper(float base_lr, int64_t total_steps);
  float lr_at(int64_t step) const override;

 private:
  float base_lr_;
  std::vector<int64_t> milestones_;
  float gamma_;
};

/// min + (base − min)(1 + cos(π·step/total))/2 (torch CosineAnnealingLR's closed form).
class CosineLr final : public LrSchedule {
 public:
  CosineLr(float base_lr, int64_t total_steps, float min_lr = 0.0f);
  float lr_at(int64_t step) const override;

 private:
  float base_lr_;
  int64_t total_steps_;
  float min_lr_;
};

/// torch OneCycleLR with cosine annealing: max/div_factor → max over pct_start of the steps,
/// then → max/(div_factor·final_div_factor) at the last step.
class OneCycleLr final : public LrSchedule {
 public:
  OneCycleLr(float max_lr, int64_t total_steps, float pct_start = 0.3f, float div_factor = 25.0f,
             float final_div_factor = 1e4f);
  float lr_at(int64_t step) const override;

 private:
  float max_lr_;
  int64_t total_steps_;
  float pct_start_;
  float initial_lr_;
  float final_lr_;
};

/// Linear warm-up from start_factor × the inner schedule's first value over warmup_steps, then
/// the inner schedule counted from the end of the warm-up.
class WarmupLr final : public LrSchedule {
 public:
  WarmupLr(std::shared_ptr<const LrSchedule> inner, int64_t warmup_steps,
           float start_factor = 0.1f);
  float lr_at(int64_t step) const override;

 private:
  std::shared_ptr<const LrSchedule> inner_;
  int64_t warmup_steps_;
  float start_factor_;
};

}  // namespace tandem::nn
