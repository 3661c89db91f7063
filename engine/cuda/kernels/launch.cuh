#pragma once
// Shared by the .cu files: the one __global__ wrapper of the per-element kernel bodies (Note
// [Kernel bodies] in kernels/grid.h) and its launch.

#include <cuda_runtime_api.h>

#include "engine/cuda/kernels/grid.h"
#include "engine/cuda/kernels/types.h"
#include "engine/cuda/runtime/cuda_check.h"

namespace tandem::cuda::kernels {

// Runs `body` over [0, body.n) with the grid-stride loop.
template <typename Body>
__global__ void grid_stride_kernel(Body body) {
  grid_stride(body, blockIdx.x, threadIdx.x, blockDim.x, gridDim.x);
}

// Queues `body` on `stream` with blocks_for(body.n) blocks of kThreads (the caller checks the
// launch). Kernel arguments travel by value, so a body stays well under the 4 KB limit.
template <typename Body>
void launch_grid_stride(const Body& body, cudaStream_t stream) {
  static_assert(sizeof(Body) <= 4096, "kernel arguments over 4 KB");
  grid_stride_kernel<<<blocks_for(body.n), kThreads, 0, stream>>>(body);
}

// Runs launch(T{}) with T the C++ type of `type`, float or BFloat16 (Note [Element types] in
// kernels/types.h), then checks the launch; any other type throws, naming `op`.
template <typename Launch>
void with_activation_type(DType type, const char* op, const Launch& launch) {
  if (type == DType::BFloat16) {
    launch(BFloat16{});
  } else {
    TANDEM_CHECK(type == DType::Float32, "[", op, "] takes float32 or bfloat16");
    launch(float{});
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda::kernels
