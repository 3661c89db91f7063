#pragma once
/// Synchronised batch norm (PyTorch's SyncBatchNorm): in training, the batch statistics are those
/// of the global batch, every rank's images together, so N ranks of B images normalise exactly as
/// one process of N*B would (per-rank statistics are why DDP otherwise drifts from one process).
///
/// nn knows no process groups: the sums cross ranks through a StatisticsReducer, which
/// parallel::convert_sync_batchnorm() provides over the DDP process group.
///
/// Note [Synchronised batch norm]: one collective in forward and one in backward per batch norm,
/// as in PyTorch (each is a launch and a round trip between the GPUs; ResNet-20 has 21 batch
/// norms). Forward: each rank computes its own per-channel mean and biased variance (two passes
/// over its x, so a large mean does not cancel) and the ranks exchange [mean, variance, count];
/// every rank then combines them as Chan et al.'s parallel variance does (PyTorch's
/// batch_norm_gather_stats_with_counts): mean = sum(n_r mean_r) / n and variance =
/// sum(n_r (var_r + (mean_r - mean)^2)) / n, with no sum of squares to cancel either. PyTorch
/// all-gathers the triples; here each rank writes its own into its row of a zeroed
/// (3, ranks, C) tensor, and one all-reduce (sum) of that is the all-gather, already laid out
/// one quantity per row block (so the combination needs no strided views), through the same
/// sum_over_ranks() as backward. Backward all-reduces sum(grad_y) and sum(grad_y * x_hat)
/// together. grad_gamma and grad_beta stay local sums, as in PyTorch: DDP averages them like
/// every gradient, and with each rank's loss a mean over its own images that average is the
/// single-process gradient. Every rank must run the same batch norms in the same order (they
/// are collectives), which a DDP model does; the all-reduces of backward interleave with DDP's
/// bucket all-reduces in the same order on every rank, since all are issued by the backward pass
/// in graph order. Nothing is read on the host: the counts stay device tensors (1/count and
/// count/(count-1) are device ops), and the reducer's all-reduces are stream-ordered
/// (Work::wait, not synchronize), so on a GPU neither forward nor the autograd worker's backward
/// waits for them.

#include <memory>

#include "engine/ops/norm.h"
#include "engine/tensor.h"

namespace tandem::nn {

/// Sums a tensor over every rank, in place; every rank calls it in the same order.
class StatisticsReducer {
 public:
  virtual ~StatisticsReducer() = default;
  virtual void sum_over_ranks(Tensor& values) = 0;
  /// This process's rank among the size() ranks that sum.
  virtual int rank() const = 0;
  virtual int size() const = 0;
};

/// Training-mode batch norm of x (N, C, H, W) with statistics over every rank's batch;
/// running_mean / running_var (when defined) are updated with them as batch_norm2d does.
/// relu: returns relu(y) (not fused).
Tensor sync_batch_norm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         const Tensor& running_mean, const Tensor& running_var,
                         const BatchNormOptions& options,
                         const std::shared_ptr<StatisticsReducer>& reducer);

}  // namespace tandem::nn
