#pragma once
/// SyncBatchNorm for DDP: convert_sync_batchnorm() makes every BatchNorm2d of a model normalise
/// with the statistics of the whole global batch, all-reduced over a process group (Note
/// [Synchronised batch norm] in nn/sync_batch_norm.h). PyTorch's
/// nn.SyncBatchNorm.convert_sync_batchnorm(); the state_dict does not change.

#include <memory>

#include "nn/module.h"
#include "parallel/comm/process_group.h"

namespace tandem::parallel {

/// Sets a reducer over `group` on every BatchNorm2d in `module`'s tree; returns how many.
/// Every rank of the group must convert the same model and run it under DDP.
int convert_sync_batchnorm(nn::Module& module, std::shared_ptr<ProcessGroup> group);

/// Whether some BatchNorm2d in `module`'s tree is synchronised (convert_sync_batchnorm).
bool has_sync_batchnorm(const nn::Module& module);

}  // namespace tandem::parallel
