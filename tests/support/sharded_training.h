#pragma once
/// What the sharded data parallel tests (tests/parallel/zero) share: a few steps of conv_bn_net
/// under DDP at a given ZeRO stage, what they leave, and the comparison with plain DDP's.
///
/// The bound (Note [Sharded data parallel] in parallel/zero/sharding.h): SGD is elementwise, so
/// a rank stepping its part of a bucket gives each element the update plain SGD gives it from the
/// same gradient. Stage 1's gradient is DDP's all-reduce itself, over the same buckets: its
/// weights and momentum are plain DDP's bit for bit. Stages 2 and 3 reduce-scatter, which may
/// add the ranks' terms in another order than the all-reduce (stage 3 also over other buckets,
/// one per unit), so each gradient element may differ by a few float32 roundings (≤
/// 2(W−1)·2⁻²⁴ of the sum of the terms' magnitudes), a difference that then flows through the
/// following steps' forward and backward: over 3 steps of this small, well-conditioned network
/// far below kReductionOrderBound of the largest value; a wrong shard, a double step or a lost
/// momentum is 1e-2 or more. Two ranks add a + b = b + a in any order: bit for bit.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/precision.h"
#include "nn/sgd.h"
#include "parallel/comm/process_group.h"
#include "parallel/comm_hook.h"
#include "parallel/distributed_data_parallel.h"

namespace tandem::testing {

constexpr int64_t kShardedRows = 4;  // images per rank and micro-batch
/// Stages 2 and 3 against plain DDP at 3 ranks and more, relative to the largest value.
constexpr double kReductionOrderBound = 1e-5;

/// Stage 1 and two ranks bit for bit, else kReductionOrderBound.
double bound_against_ddp(parallel::Sharding sharding, int world);

/// Three buckets of 106, 576 and 232 elements (conv_bn_net in reverse registration order), so the
/// parts cut through parameters and, at 3 ranks, every bucket is padded. Plain DDP keeps them
/// too unless told to rebuild them after the first step, as it does by default: Gloo's ring adds
/// each element's terms in an order set by where the element falls in its bucket, so other
/// buckets round differently at 3 ranks and more (Note [Bucket order on resume]). Stage 3's
/// units: conv → bn → relu twice, then the head (232, 592 and 90 elements).
parallel::DdpOptions sharded_options(parallel::Sharding sharding, bool rebuild_buckets = false);

struct Trained {
  std::vector<Tensor> weights;   ///< the module's parameters, in registration order
  std::vector<Tensor> momentum;  ///< the whole momentum on rank 0 (consolidated), else empty
  size_t optimizer_bytes = 0;
  parallel::ModelStateBytes bytes;
  int64_t shard_numel = 0;   ///< this rank's elements over every bucket (0 without sharding)
  int64_t padded_numel = 0;  ///< every bucket's elements, padding included
  bool grads_left = false;   ///< some parameter still holds a .grad after the last step
  std::vector<std::vector<size_t>> buckets;  ///< the parameters of each bucket, at the end
};

/// What the model runs with besides the optimizer.
struct Variant {
  nn::Precision precision = nn::Precision::Float32;
  bool sync_bn = false;
  parallel::GradCompression compression = parallel::GradCompression::None;  ///< built-in hooks
  bool rebuild_buckets = false;  ///< plain DDP's default: buckets in the first step's arrival order
  /// A checkpoint the network and SGD load before DDP wraps them, as train_cifar resumes.
  std::string load_from{};
  /// Where rank 0 saves a checkpoint after the last step, as train_cifar does (a collective).
  std::string save_to{};
};

/// `steps` steps of `micro` micro-batches each (all but the last under no_sync(), each mean loss
/// scaled by 1/micro, as train_cifar accumulates).
Trained train_sharded(const std::shared_ptr<parallel::ProcessGroup>& group,
                      parallel::Sharding sharding, const nn::SgdConfig& config, int steps,
                      int micro, Variant variant = {});

/// The weights and (on every rank) the momentum of the checkpoint at `path`.
Trained read_checkpoint(const std::string& path);

/// The weights and momentum within `relative` of the largest reference value (0: bit for bit).
void expect_like_ddp(const Trained& actual, const Trained& expected, double relative,
                     const std::string& what);

/// Each of `shardings` against plain DDP within bound_against_ddp(), 3 steps of three SGD
/// settings (momentum and weight decay; Nesterov over 2 micro-batches; no momentum, no decay for
/// 1-D parameters, over 3 micro-batches).
void expect_stages_like_ddp(const std::shared_ptr<parallel::ProcessGroup>& group,
                            const std::vector<parallel::Sharding>& shardings);

}  // namespace tandem::testing
