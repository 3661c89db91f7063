// The NCCL process group's device: checked, chosen (Note [NCCL device]) and bound to the thread.
// CUDA runtime calls only, no NCCL, so the unit tests run it on the fake CUDA runtime.
#include <cstdio>

#include "engine/cuda/runtime/device.h"
#include "engine/error.h"
#include "parallel/comm/nccl/nccl_process_group.h"

namespace tandem::parallel {

bool nccl_available() {
  return true;
}

void check_nccl_device(int rank, int device) {
  const int count = cuda::device_count();
  TANDEM_CHECK(count > 0, "[nccl] rank ", rank, " needs a GPU for the NCCL process group, but ",
               cuda::unavailable_reason(), "; use the gloo backend on CPUs");
  TANDEM_CHECK(device >= 0 && device < count, "[nccl] rank ", rank, " needs cuda:", device,
               " (its local rank), but this machine has ", count, " CUDA device(s); start at most ",
               count, " processes per machine (--nproc-per-node) or check CUDA_VISIBLE_DEVICES");
}

int bind_nccl_device(int rank, int local_rank, int local_world_size) {
  check_nccl_device(rank, 0);  // "no GPU" in the words of the NCCL group
  const NcclDeviceChoice choice =
      choose_nccl_device(rank, local_rank, local_world_size, cuda::device_count(), launcher_gpus());
  if (!choice.note.empty()) std::fprintf(stderr, "%s\n", choice.note.c_str());
  // Threads start on device 0: without this, every DeviceGuard(device) of this thread would
  // switch back to device 0 and create a context there, on another rank's GPU.
  cuda::set_device(choice.device);
  return choice.device;
}

}  // namespace tandem::parallel
