#pragma once
/// Synchronised batch norm (PyTorch's SyncBatchNorm): in training, the batch statistics are those
/// of the global batch, every rank's images together, so N ranks of B images normalise exactly as
/// one process of N*B would (per-rank statistics are why DDP otherwise drifts from one process).
///
/// nn knows no process groups: the sums cross ranks through a StatisticsReducer, which
/// parallel::convert_sync_batchnorm() provides over the DDP process group.
///
/// Note [Synchronised batch norm]: forward all-reduces the per-channel sums and the count (mean),
/// then the sums of squared deviations from that mean (variance: two passes, so a large mean does
/// not cancel); backward all-reduces sum(grad_y) and sum(grad_y * x_hat). grad_gamma and
/// grad_beta stay local sums, as in PyTorch: DDP averages them like every gradient, and with each
/// rank's loss a mean over its own images that average is the single-process gradient. Every
/// rank must run the same batch norms in the same order (they are collectives), which a DDP
/// model does; the all-reduces of backward interleave with DDP's bucket all-reduces in the same
/// order on every rank, since all are issued by the backward pass in graph order. Nothing is
/// read on the host: the count over all ranks stays a device tensor (1/count and count/(count-1)
/// are device ops), and the reducer's all-reduces are stream-ordered (Work::wait, not
/// synchronize), so on a GPU neither forward nor the autograd worker's backward waits for them.

#include <memory>

#include "engine/ops/norm.h"
#include "engine/tensor.h"

namespace tandem::nn {

/// Sums a tensor over every rank, in place; every rank calls it in the same order.
class StatisticsReducer {
 public:
  virtual ~StatisticsReducer() = default;
  virtual void sum_over_ranks(Tensor& values) = 0;
};

/// Training-mode batch norm of x (N, C, H, W) with statistics over every rank's batch;
/// running_mean / running_var (when defined) are updated with them as batch_norm2d does.
/// relu: returns relu(y) (not fused).
Tensor sync_batch_norm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         const Tensor& running_mean, const Tensor& running_var,
                         const BatchNormOptions& options,
                         const std::shared_ptr<StatisticsReducer>& reducer);

}  // namespace tandem::nn
