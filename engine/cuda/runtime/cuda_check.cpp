#include "engine/cuda/runtime/cuda_check.h"

namespace tandem::cuda::detail {

// cuBLAS's and cuDNN's counterparts are in library_errors.cpp: this file needs libcudart only,
// so the unit tests on the fake runtime (tests/support/fake_cuda) compile it as it is.
void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  // Clears the runtime's last error so that a later cudaGetLastError() reports a new one.
  cudaGetLastError();
  ::tandem::detail::throw_error(
      file, line, call,
      ::tandem::detail::concat("[cuda] CUDA error ", cudaGetErrorName(status), ": ",
                               cudaGetErrorString(status)));
}

}  // namespace tandem::cuda::detail
