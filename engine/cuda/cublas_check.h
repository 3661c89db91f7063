#pragma once
/// CUBLAS_CHECK: a cuBLAS status code as a tandem::Error with cuBLAS's own message, the failing
/// call and file:line (as CUDA_CHECK in runtime/cuda_check.h). cuBLAS is the kernels' library,
/// loaded on first use (Note [Lazy cuBLAS] in cublas_library.h), so its check lives kernel-side,
/// beside CUDNN_CHECK (cudnn_check.h), and the runtime names libcudart alone.

#include <cublas_v2.h>

#include "engine/error.h"

namespace tandem::cuda::detail {

[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);

}  // namespace tandem::cuda::detail

#define CUBLAS_CHECK(call)                                                               \
  do {                                                                                   \
    const cublasStatus_t tandem_cublas_status_ = (call);                                 \
    if (tandem_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]] {                   \
      ::tandem::cuda::detail::throw_cublas_error(tandem_cublas_status_, #call, __FILE__, \
                                                 __LINE__);                              \
    }                                                                                    \
  } while (false)
