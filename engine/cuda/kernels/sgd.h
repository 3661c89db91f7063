#pragma once
/// The fused SGD update (elementwise.cu) for one tensor and for many tensors per launch: the
/// per-element body, the multi-tensor block body and the host-side chunking that plans the
/// multi-tensor launches. Note [Kernel bodies] in grid.h.

#include <cstdint>

#include "engine/cuda/kernels/grid.h"
#include "engine/cuda/kernels/types.h"
#include "engine/error.h"
#include "engine/host_device.h"

namespace tandem::cuda::kernels {

/// Element i of one torch.optim.SGD step, shared by the single- and multi-tensor kernels; the
/// same arithmetic as the CPU kernel, in the same order. buffer is null when momentum is 0.
TANDEM_HD inline void sgd_update(float* param, const float* grad, float* buffer, int64_t i,
                                 const SgdParams& o) {
  float d = grad[i] + o.weight_decay * param[i];
  if (buffer != nullptr) {
    buffer[i] = o.first_step ? d : o.momentum * buffer[i] + (1.0f - o.dampening) * d;
    d = o.nesterov ? d + o.momentum * buffer[i] : buffer[i];
  }
  param[i] -= o.lr * d;
}

/// param, grad, buffer: (n)
struct SgdBody {
  float* param;
  const float* grad;
  float* buffer;
  SgdParams o;
  int64_t n;
  TANDEM_HD void operator()(int64_t i) const { sgd_update(param, grad, buffer, i, o); }
};

// Note [Multi-tensor SGD]
// A ResNet-20 step updates ~65 parameters, most of them a few hundred to a few thousand
// elements: one launch per parameter costs more in launch latency than the update itself. As
// PyTorch's multi_tensor_apply does, one launch updates a chunk of tensors whose pointers and
// sizes travel by value in the kernel arguments (no device allocation, no host-to-device copy):
// up to kSgdTensorsPerLaunch tensors, as many as keep the arguments under the 4 KB that every
// CUDA version accepts. The grid is flat over (tensor, range of kSgdBlockElements elements):
// tensor t owns blocks [first_block[t], first_block[t + 1]) and each block finds its tensor by
// a binary search over first_block, so a block never straddles two tensors and a large tensor
// simply gets many blocks. Longer lists take several launches.
constexpr int kSgdTensorsPerLaunch = 48;
constexpr int64_t kSgdBlockElements = 16 * kThreads;
// Keeps block indices in int; a chunk that would pass it is launched first.
constexpr int64_t kSgdMaxBlocksPerLaunch = int64_t{1} << 30;

struct SgdChunk {
  float* param[kSgdTensorsPerLaunch];
  const float* grad[kSgdTensorsPerLaunch];
  float* buffer[kSgdTensorsPerLaunch];  // null when momentum is 0
  int64_t n[kSgdTensorsPerLaunch];
  int first_block[kSgdTensorsPerLaunch + 1];  // first_block[count] = the grid size
  int count;
};
static_assert(sizeof(SgdChunk) + sizeof(SgdParams) <= 4096, "kernel arguments over 4 KB");

/// Thread `thread` of block `block` (of `threads`) in a grid of chunk.first_block[chunk.count]
/// blocks (Note [Multi-tensor SGD]).
TANDEM_HD inline void sgd_multi_block(const SgdChunk& chunk, const SgdParams& o, int block,
                                      int64_t thread, int64_t threads) {
  int lo = 0, hi = chunk.count - 1;  // the last tensor whose first block is <= block
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (chunk.first_block[mid] <= block) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int t = lo;
  const int64_t begin = static_cast<int64_t>(block - chunk.first_block[t]) * kSgdBlockElements;
  const int64_t end = min_of(begin + kSgdBlockElements, chunk.n[t]);
  for (int64_t i = begin + thread; i < end; i += threads) {
    sgd_update(chunk.param[t], chunk.grad[t], chunk.buffer[t], i, o);
  }
}

/// Splits `count` tensors into the chunks of Note [Multi-tensor SGD], in order, skipping empty
/// tensors, and calls launch(chunk, blocks) for each: chunk.first_block[chunk.count] == blocks.
template <typename Launch>
void for_each_sgd_chunk(const SgdTensorPointers* tensors, int64_t count, Launch&& launch) {
  SgdChunk chunk{};
  int64_t blocks = 0;
  auto flush = [&] {
    if (chunk.count == 0) return;
    chunk.first_block[chunk.count] = static_cast<int>(blocks);
    launch(static_cast<const SgdChunk&>(chunk), blocks);
    chunk.count = 0;
    blocks = 0;
  };
  for (int64_t i = 0; i < count; ++i) {
    const SgdTensorPointers& t = tensors[i];
    if (t.n == 0) continue;
    const int64_t tensor_blocks = (t.n + kSgdBlockElements - 1) / kSgdBlockElements;
    TANDEM_CHECK(tensor_blocks <= kSgdMaxBlocksPerLaunch, "[sgd_step_multi] tensor ", i,
                 " has too many elements (", t.n, ")");
    if (chunk.count == kSgdTensorsPerLaunch || blocks + tensor_blocks > kSgdMaxBlocksPerLaunch) {
      flush();
    }
    chunk.param[chunk.count] = t.param;
    chunk.grad[chunk.count] = t.grad;
    chunk.buffer[chunk.count] = t.momentum_buffer;
    chunk.n[chunk.count] = t.n;
    chunk.first_block[chunk.count] = static_cast<int>(blocks);
    ++chunk.count;
    blocks += tensor_blocks;
  }
  flush();
}

}  // namespace tandem::cuda::kernels
