#pragma once
/// A CPU stand-in for a CUDA grid, for the unit tests of the kernel bodies (Note [Kernel bodies]
/// in engine/cuda/kernels/grid.h): every (block, thread) of a grid runs once, one after the
/// other, in a shuffled order, so a body that leans on another thread's work or on a launch
/// order fails here too. Per-element bodies run through the same grid_stride() loop as on the
/// device, so a deliberately small grid makes that loop wrap many times.

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "engine/cuda/kernels/grid.h"

namespace tandem::testing {

struct CpuGrid {
  int64_t blocks = 1;
  int64_t threads = 1;  ///< per block
};

/// The grid the CUDA launchers use for n elements (engine/cuda/kernels/launch.cuh).
inline CpuGrid launch_grid(int64_t n) {
  return {cuda::kernels::blocks_for(n), cuda::kernels::kThreads};
}

/// The launch grid and grids far too small for n elements, where every thread loops.
inline std::vector<CpuGrid> grids_for(int64_t n) {
  return {launch_grid(n), {3, 32}, {1, 1}};
}

/// Runs thread(block, thread_index) for every thread of `grid`: blocks in a shuffled order, the
/// threads of each block in a shuffled order (fixed by `seed`).
template <typename Thread>
void run_grid(CpuGrid grid, Thread&& thread, uint64_t seed = 1) {
  std::mt19937_64 random(seed);
  std::vector<int64_t> blocks(static_cast<size_t>(grid.blocks));
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), random);
  std::vector<int64_t> threads(static_cast<size_t>(grid.threads));
  std::iota(threads.begin(), threads.end(), 0);
  for (const int64_t block : blocks) {
    std::shuffle(threads.begin(), threads.end(), random);
    for (const int64_t t : threads) thread(block, t);
  }
}

/// Runs a per-element body over [0, body.n) on `grid`, each thread through grid_stride().
template <typename Body>
void run_grid_stride(const Body& body, CpuGrid grid) {
  run_grid(grid, [&](int64_t block, int64_t thread) {
    cuda::kernels::grid_stride(body, block, thread, grid.threads, grid.blocks);
  });
}

/// run_grid_stride() on the grid the CUDA launcher would use.
template <typename Body>
void run_grid_stride(const Body& body) {
  run_grid_stride(body, launch_grid(body.n));
}

}  // namespace tandem::testing
