// Linked when Tandem is built without CUDA: asking for a CUDA device's kernels or uploads fails
// with a clear message instead of a link error or a crash. The runtime's entry points are in
// no_cuda_runtime.cpp, apart, because the fake-runtime tests (tests/engine/cuda/runtime) take this
// file with the real CUDA runtime.

#include "engine/backend/backend.h"
#include "engine/device.h"
#include "engine/upload.h"

namespace tandem {

Backend& cuda_backend() {
  TANDEM_FAIL("[cuda] ", cuda_unavailable_reason(),
              ": this Tandem build has no CUDA backend; reconfigure with -DTANDEM_CUDA=ON on a "
              "machine with the CUDA toolkit, cuDNN and NCCL, or use cpu devices");
}

namespace detail {

std::unique_ptr<UploadStream> make_cuda_upload_stream(int /*device*/) {
  cuda_backend();  // throws the message above
  return nullptr;
}

}  // namespace detail
}  // namespace tandem
