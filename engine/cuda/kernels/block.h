#pragma once
/// Note [Block policy]
/// The kernels whose threads cooperate within a block (sums per block, the row softmax and
/// cross-entropy, the loss mean, the row argmax) are templates on a block policy, so the same
/// body runs on the GPU and on a CPU emulation of a block in the unit tests. A policy `block`
/// offers:
///   block.thread()              this thread's index in the block (threadIdx.x, unsigned)
///   block.sync()                __syncthreads()
///   block.reduce(v, op)         op over the block's values, valid in thread 0 only (CUB's
///   block.sum(v)                BlockReduce); its storage is reused only after a sync()
///   block.shfl_down(v, offset)  __shfl_down_sync over the full warp
///   Block::atomic_min(p, v)     atomicMin on an int
/// engine/cuda/kernels/block.cuh is the CUDA policy (CUB and shuffles); tests/support/cpu_block.h
/// runs a block's threads as std::threads with barriers. The bodies' block size is a compile-time
/// constant of the kernel; the policy's block must have exactly that many threads.

#include "engine/host_device.h"

namespace tandem::cuda::kernels {

struct MaxOp {
  TANDEM_HD float operator()(float a, float b) const { return a > b ? a : b; }
};

}  // namespace tandem::cuda::kernels
