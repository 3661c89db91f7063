#pragma once
/// The launch geometry of Tandem's own kernels and the grid-stride loop, shared by the CUDA
/// wrappers (engine/cuda/kernels/launch.cuh) and the CPU grid emulator of the tests
/// (tests/support/cpu_grid.h), so both run the same loop. No CUDA include: the host compiler
/// builds this header too (engine/host_device.h).

#include <algorithm>
#include <cstdint>

#include "engine/host_device.h"

namespace tandem::cuda::kernels {

constexpr int kThreads = 256;

// min/max for device code whatever the argument types (CUDA's overloads are not templates).
template <typename T>
TANDEM_HD inline T min_of(T a, T b) {
  return b < a ? b : a;
}
template <typename T>
TANDEM_HD inline T max_of(T a, T b) {
  return a < b ? b : a;
}
// isnan for device code and the host compiler alike: only a NaN differs from itself.
TANDEM_HD inline bool is_nan(float v) {
  return v != v;
}

/// Blocks for n elements at one element per thread, capped: kernels loop (grid-stride) over the
/// rest, so a huge tensor never needs more than 2^20 blocks.
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + threads - 1) / threads, 1, 1 << 20));
}

/// Thread `thread` of block `block`, in a grid of `blocks` blocks of `threads` threads, runs
/// body(i) for i = its global index, then every grid size further, while i < body.n. A body is
/// a copyable struct with an `int64_t n` and a `void operator()(int64_t i) const` that touches
/// element i only (Note [Kernel bodies]).
template <typename Body>
TANDEM_HD inline void grid_stride(const Body& body, int64_t block, int64_t thread, int64_t threads,
                                  int64_t blocks) {
  for (int64_t i = block * threads + thread; i < body.n; i += blocks * threads) body(i);
}

// Note [Kernel bodies]
// Each per-element kernel is a body struct in a header of this folder (no CUDA include) and one
// generic __global__ wrapper (launch.cuh's grid_stride_kernel) that only runs grid_stride(). The
// host compiler builds the same bodies for the unit tests, which run them on a CPU grid
// (tests/support/cpu_grid.h) against the CPU backend: indexing, tie-breaking, bin edges and the
// grid-stride wrap are tested on machines without a GPU. Kernels whose threads cooperate within
// a block (sums per block, row softmax, argmax) are templates on a block policy instead (Note
// [Block policy] in block.h).

}  // namespace tandem::cuda::kernels
