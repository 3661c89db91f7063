#pragma once
/// Sharding: what sharded data parallel (ZeRO, Note [Sharded data parallel] in
/// parallel/zero/sharded_sgd.h) splits across the ranks. A DdpOptions field, and the value of
/// the programs' --zero flag.

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
