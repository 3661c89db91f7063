// Linked when Tandem is built without CUDA: asking for a CUDA device fails with
// a clear message instead of a link error or a crash.

#include "engine/backend.h"
#include "engine/device.h"
#include "engine/upload.h"

namespace tandem {

Backend& cuda_backend() {
  TANDEM_FAIL("[cuda] ", cuda_unavailable_reason(),
              ": this Tandem build has no CUDA backend; reconfigure with -DTANDEM_CUDA=ON on a "
              "machine with the CUDA toolkit, cuDNN and NCCL, or use cpu devices");
}

bool cuda_available() {
  return false;
}

std::string cuda_unavailable_reason() {
  return "built without CUDA";
}

void bind_thread_to(Device /*device*/) noexcept {}  // no CUDA device can exist

namespace detail {

std::unique_ptr<UploadStream> make_cuda_upload_stream(int /*device*/) {
  cuda_backend();  // throws the message above
  return nullptr;
}

}  // namespace detail
}  // namespace tandem
