#pragma once
// Shared by the backend's .cpp files: the device of a kernel call, made current for the call,
// and its current stream.

#include <cuda_runtime_api.h>

#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/tensor.h"

namespace tandem::cuda {

inline int cuda_index(const Tensor& tensor, const char* op) {
  TANDEM_CHECK(tensor.device().is_cuda(), "[", op, "] CUDA backend got a tensor on ",
               tensor.device());
  return tensor.device().index;
}

/// Makes the device of `tensor` current for the scope; `stream` is its current stream.
struct OnDevice {
  OnDevice(const Tensor& tensor, const char* op)
      : index(cuda_index(tensor, op)), guard(index), stream(current_stream(index)) {}

  int index;
  DeviceGuard guard;
  cudaStream_t stream;
};

}  // namespace tandem::cuda
