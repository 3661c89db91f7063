#pragma once
// Shared by the .cu files: grid sizes and the grid-stride loop.

#include <algorithm>
#include <cstdint>

#include "engine/cuda/cuda_check.h"

namespace tandem::cuda::kernels {

constexpr int kThreads = 256;

// min/max for device code whatever the argument types (CUDA's overloads are not templates).
template <typename T>
__host__ __device__ __forceinline__ T min_of(T a, T b) {
  return b < a ? b : a;
}
template <typename T>
__host__ __device__ __forceinline__ T max_of(T a, T b) {
  return a < b ? b : a;
}

// Blocks for n elements at one element per thread, capped: kernels loop (grid-stride) over the
// rest, so a huge tensor never needs more than 2^20 blocks.
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + threads - 1) / threads, 1, 1 << 20));
}

}  // namespace tandem::cuda::kernels

// for (int64_t i = <global thread index>; i < n; i += <grid size>)
#define TANDEM_GRID_STRIDE_LOOP(i, n)                                                    \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
