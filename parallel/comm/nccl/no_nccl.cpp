// A build without the CUDA backend has no NCCL process group; init_process_group("nccl") says so
// in one line (engine/no_cuda/no_cuda.cpp does the same for the CUDA backend).
#include "engine/error.h"
#include "parallel/comm/nccl/nccl_process_group.h"

namespace tandem::parallel {

bool nccl_available() {
  return false;
}

void check_nccl_device(int, int) {
  TANDEM_FAIL(
      "[nccl] this build has no CUDA, so no NCCL process group (configure with the CUDA "
      "toolkit, cuDNN and NCCL installed, -DTANDEM_CUDA=ON); use the gloo backend on CPUs");
}

int bind_nccl_device(int rank, int, int) {
  check_nccl_device(rank, 0);  // throws
  return 0;
}

// By value as in the CUDA build, whose group keeps the options.
std::shared_ptr<ProcessGroup> make_nccl_process_group(
    const std::shared_ptr<Store>&, int rank, int, int device,
    ProcessGroupOptions) {          // NOLINT(performance-unnecessary-value-param)
  check_nccl_device(rank, device);  // throws
  return nullptr;
}

}  // namespace tandem::parallel
