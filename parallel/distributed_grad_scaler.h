#pragma once
/// DistributedGradScaler: nn::GradScaler for a job of several processes (DistributedDataParallel,
/// sharded data parallel), in which an inf or NaN that any rank finds skips the step on every
/// rank. nn knows nothing of processes, so the process group comes in here.
///
///   DistributedGradScaler scaler(*group);       // the DDP model's group, nn::GradScalerOptions
///   scaler.scale(loss).backward();              // DDP reduces the scaled gradients
///   scaler.step(optimizer);                     // nn::Sgd, or ShardedSgd under ZeRO
///   scaler.update();                            // the same scale on every rank
///
/// Note [One verdict for every rank]: a rank that steps while another skips leaves their weights
/// apart for good, and under ZeRO its step's all-gather waits for a rank that never comes. Plain
/// DDP's ranks hold the same averaged gradients, so they find the same inf or NaN; a sharded
/// optimizer's rank checks only its part of them (ShardedSgd::gradients()), and a gradient that
/// overflows in one part is finite in the others. So each rank's flag goes through one
/// all-reduce (Max of 0 or 1, one float) in every unscale(), whatever the sharding: every rank
/// then skips the same steps and, update() being a function of the flags alone, keeps the same
/// scale. PyTorch's ShardedGradScaler (FSDP) all-reduces its flags the same way; its plain
/// GradScaler relies on DDP's identical gradients.

#include <cstdint>

#include "nn/grad_scaler.h"
#include "parallel/comm/process_group.h"

namespace tandem::parallel {

class DistributedGradScaler final : public nn::GradScaler {
 public:
  /// `group` (every rank that steps together) must outlive this.
  explicit DistributedGradScaler(ProcessGroup& group, const nn::GradScalerOptions& options = {})
      : nn::GradScaler(options), group_(group) {}

  /// The all-reduces of found-inf flags run so far: one per unscale().
  int64_t found_inf_allreduces() const { return found_inf_allreduces_; }

 private:
  void agree_found_inf(Tensor& found_inf) override;

  ProcessGroup& group_;
  int64_t found_inf_allreduces_ = 0;
};

}  // namespace tandem::parallel
