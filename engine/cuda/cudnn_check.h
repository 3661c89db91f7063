#pragma once
/// CUDNN_CHECK: a cuDNN status code as a tandem::Error with cuDNN's own message, the failing
/// call and file:line (as CUDA_CHECK in cuda_check.h). Only the engine's cuDNN code includes it:
/// cuDNN is a private dependency of the engine.

#include <cudnn.h>

#include "engine/error.h"

namespace tandem::cuda::detail {

[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file,
                                    int line);

}  // namespace tandem::cuda::detail

#define CUDNN_CHECK(call)                                                                         \
  do {                                                                                            \
    const cudnnStatus_t tandem_cudnn_status_ = (call);                                            \
    if (tandem_cudnn_status_ != CUDNN_STATUS_SUCCESS) [[unlikely]] {                              \
      ::tandem::cuda::detail::throw_cudnn_error(tandem_cudnn_status_, #call, __FILE__, __LINE__); \
    }                                                                                             \
  } while (false)
