#pragma once
/// CUDA_CHECK: turns a CUDA runtime status code into a
/// tandem::Error carrying the library's own message, the failing call and
/// file:line, e.g.
///
///   [cuda] CUDA error cudaErrorMemoryAllocation: out of memory
///   (check `cudaMalloc(&ptr, size)` failed) at engine/cuda/runtime/caching_allocator.cpp:120
///
/// CUDNN_CHECK and CUBLAS_CHECK live kernel-side (engine/cuda/cudnn_check.h, cublas_check.h):
/// the runtime names libcudart alone, and only the engine's own cuDNN code compiles against
/// cuDNN (a private dependency). NCCL's errors are the communication
/// layer's (parallel/comm/nccl/nccl_api.h), so the engine need not link NCCL.
/// The checks are usable from .cu files too (they only need engine/error.h).

#include <cuda_runtime_api.h>

#include "engine/error.h"

namespace tandem::cuda::detail {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                   int line);

}  // namespace tandem::cuda::detail

#define CUDA_CHECK(call)                                                                        \
  do {                                                                                          \
    const cudaError_t tandem_cuda_status_ = (call);                                             \
    if (tandem_cuda_status_ != cudaSuccess) [[unlikely]] {                                      \
      ::tandem::cuda::detail::throw_cuda_error(tandem_cuda_status_, #call, __FILE__, __LINE__); \
    }                                                                                           \
  } while (false)

/// After a kernel launch: a bad launch configuration shows up here, not at the <<<>>>.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
