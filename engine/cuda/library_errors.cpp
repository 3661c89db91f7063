// CUBLAS_CHECK's and CUDNN_CHECK's errors (engine/cuda/cublas_check.h,
// engine/cuda/cudnn_check.h).

#include "engine/cuda/cublas_check.h"
#include "engine/cuda/cublas_library.h"
#include "engine/cuda/cudnn_check.h"
#include "engine/cuda/runtime/cuda_check.h"

namespace tandem::cuda::detail {

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  const CublasLibrary& library = cublas();  // loaded: a status came from it
  ::tandem::detail::throw_error(
      file, line, call,
      ::tandem::detail::concat("[cublas] cuBLAS error ", library.status_name(status), ": ",
                               library.status_string(status)));
}

void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
  // cuDNN 9 keeps a per-thread detail message (which parameter was bad) beside the status.
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof(detail));
  ::tandem::detail::throw_error(
      file, line, call,
      ::tandem::detail::concat("[cudnn] cuDNN error ", cudnnGetErrorString(status),
                               detail[0] != '\0' ? " (" : "", detail,
                               detail[0] != '\0' ? ")" : ""));
}

}  // namespace tandem::cuda::detail
