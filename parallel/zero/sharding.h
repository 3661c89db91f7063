#pragma once
/// Sharding: what sharded data parallel (ZeRO) splits across the ranks. A DdpOptions field, and
/// the value of the programs' --zero flag. The room's parts: ShardLayout (shard_layout.h),
/// FlatParameters (flat_parameters.h), ShardedBuckets (sharded_buckets.h, stage 2's gradient
/// buckets) and ShardedSgd (sharded_sgd.h, the optimizer that steps a rank's part).
///
/// Note [Sharded data parallel]: DDP's memory weakness is that every rank holds all of the
/// parameters, gradients and optimizer state. ZeRO (Rajbhandari et al. 2020) splits them:
/// - stage 1 (Sharding::Optimizer; PyTorch's ZeroRedundancyOptimizer): gradients are
///   all-reduced as in DDP; each rank keeps momentum only for its part (Note [Shards per bucket]
///   in shard_layout.h), steps that part from the reduced bucket, and the parts are all-gathered
///   back into every rank's parameters, bucket by bucket (FlatParameters, in place);
/// - stage 2 (Sharding::Gradients; FSDP's SHARD_GRAD_OP): as stage 1, but each bucket is
///   reduce-scattered while backward runs, as DDP's all-reduces are, and a rank keeps only its
///   part of the gradients (Note [Sharded gradients] in sharded_buckets.h);
/// - stage 3 (parameters sharded too, gathered per layer before its forward and backward) is not
///   built yet (Note [Stage 3 here] in sharded_buckets.h).
/// A step thus moves the bytes of one all-reduce either way (a reduce-scatter and an all-gather
/// are each half of a ring all-reduce), and stage 1 adds the all-gather on top of DDP's
/// all-reduce. Each bucket's all-gather is launched as soon as its part has been stepped, so it
/// travels while the next bucket's part is stepped.
///
/// The result is DDP's: SGD is elementwise, so a part stepped on its own gets exactly the update
/// it gets inside the whole parameter, from the same reduced gradient. Stage 1's gradients are
/// DDP's all-reduce bit for bit over the same buckets; stage 2's reduce-scatter adds the ranks'
/// contributions in another order than the all-reduce (Note [Ring reduce-scatter]): with 2 ranks
/// a + b either way (bit-identical), with more each element differs by float rounding
/// (|Δg| ≤ 2(W−1)·2⁻²⁴·Σ|g_r|, the two orders' error bounds added). The same buckets: ZeRO keeps
/// those of construction (its shards and flat parameters live in them), while plain DDP rebuilds
/// its own after the first step in the gradients' arrival order unless rebuild_buckets = false
/// (Note [Bucket ordering]). At 3 ranks and more an all-reduce adds an element's terms in an order
/// set by its place in its bucket (Note [Bucket order on resume]), so where the rebuild moves an
/// element, stage 1 differs from default DDP by stage 2's bound from the second step on, not
/// bit for bit (2 ranks: bit for bit in any buckets). Rebuilding ZeRO's buckets too would take
/// re-flattening the parameters and re-sharding the momentum at the second step; not done.
///
/// Note [Counted memory]: what a rank holds is counted in bytes, not read off the RSS (whose
/// activations and allocator caches drown the differences): ShardedSgd::state_bytes(), and
/// DistributedDataParallel::model_state_bytes() for the parameters and the gradients at their
/// peak in a step (.grad tensors of their own, the buckets, stage 2's shards and its most bucket
/// bytes alive at once). Per rank, with P the bytes of one float32 copy of the trained
/// parameters and W ranks: momentum P (stage 0) or about P/W (stages 1, 2); gradients 2P
/// (.grad and the buckets; P with gradient_as_bucket_view) in stages 0 and 1, about P/W plus the
/// buckets in flight in stage 2. Not counted: the gradient autograd produces for one parameter,
/// which lives from its accumulation to its hook, where stage 2 drops it.

namespace tandem::parallel {

/// What sharded data parallel splits across the ranks: ZeRO's stages, FSDP's sharding strategy.
enum class Sharding {
  None,       ///< plain DDP (ZeRO stage 0; FSDP's NO_SHARD)
  Optimizer,  ///< the optimizer state (ZeRO stage 1; PyTorch's ZeroRedundancyOptimizer)
  Gradients,  ///< the optimizer state and the gradients (ZeRO stage 2; FSDP's SHARD_GRAD_OP)
};

/// "none", "optimizer", "gradients".
const char* sharding_name(Sharding sharding);

}  // namespace tandem::parallel
