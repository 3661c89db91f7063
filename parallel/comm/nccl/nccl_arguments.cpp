// The NCCL process group's pure decisions and checks (where its tensors live, the rank's device,
// the library version), built with or without CUDA so that they are tested on any machine.
#include "engine/error.h"
#include "parallel/comm/nccl/nccl_process_group.h"

namespace tandem::parallel {

void check_nccl_placement(const std::string& op, size_t index, const Tensor& t, Device device) {
  TANDEM_CHECK(t.defined(), "[nccl] ", op, ": tensor ", index, " is undefined");
  TANDEM_CHECK(t.device() == device, "[nccl] ", op, ": tensor ", index, " is on ", t.device().str(),
               "; the NCCL process group takes CUDA tensors on ", device.str(),
               " (use the gloo backend for CPU tensors)");
  TANDEM_CHECK(t.is_dense(), "[nccl] ", op, ": tensor ", index,
               " is not dense (collectives work in place on contiguous or channels-last "
               "tensors)");
}

namespace {

// Note [NCCL device]: the evidence that each local rank sees a GPU of its own as cuda:0.
bool each_rank_has_its_own_gpu(int local_world_size, int device_count, const LauncherGpus& gpus) {
  if (device_count != 1 || local_world_size <= 1) return false;
  if (gpus.visible_devices && listed_devices(*gpus.visible_devices) == 1) return true;
  return gpus.slurm_gpus && listed_devices(*gpus.slurm_gpus) >= local_world_size;
}

std::string visible_devices_text(const LauncherGpus& gpus) {
  return gpus.visible_devices ? "CUDA_VISIBLE_DEVICES=" + *gpus.visible_devices
                              : std::string("CUDA_VISIBLE_DEVICES unset");
}

}  // namespace

int nccl_gpus_needed(int local_world_size, int device_count, const LauncherGpus& gpus) {
  return each_rank_has_its_own_gpu(local_world_size, device_count, gpus) ? 1 : local_world_size;
}

// Note [NCCL device].
NcclDeviceChoice choose_nccl_device(int rank, int local_rank, int local_world_size,
                                    int device_count, const LauncherGpus& gpus) {
  TANDEM_CHECK(device_count > 0, "[nccl] rank ", rank, " sees no CUDA device");
  const int needed = nccl_gpus_needed(local_world_size, device_count, gpus);
  TANDEM_CHECK(device_count >= needed, "[nccl] rank ", rank, ": ", local_world_size,
               " processes on this machine need ", needed, " GPUs, ", device_count,
               device_count == 1 ? " is" : " are", " visible (", visible_devices_text(gpus),
               "); start at most ", device_count,
               " per machine (--nproc-per-node), give each process one GPU of its own "
               "(CUDA_VISIBLE_DEVICES, srun --gpus-per-task=1), or use the gloo backend on CPUs");
  if (needed == 1 && local_world_size > 1) {
    return {.device = 0,
            .note = detail::concat("[nccl] rank ", rank, " (local rank ", local_rank, " of ",
                                   local_world_size,
                                   " on this machine) sees one CUDA device: using it as cuda:0, "
                                   "the GPU the launcher gave this rank (",
                                   visible_devices_text(gpus), ")")};
  }
  // Only a launcher whose local rank and size disagree gets here.
  TANDEM_CHECK(local_rank < device_count, "[nccl] rank ", rank, " needs cuda:", local_rank,
               " (its local rank), but this machine has ", device_count, " CUDA device(s)");
  return {.device = local_rank, .note = ""};
}

void check_nccl_version(int library_version, int header_version) {
  // NCCL_VERSION(X, Y, Z) is X * 10000 + Y * 100 + Z since 2.9.
  const auto text = [](int code) {
    return detail::concat(code / 10000, ".", code / 100 % 100, ".", code % 100);
  };
  const int library = library_version / 100;  // major and minor
  const int header = header_version / 100;
  TANDEM_CHECK(library / 100 == header / 100 && library >= header, "[nccl] libnccl is ",
               text(library_version), ", but Tandem was built with the NCCL ", header / 100, ".",
               header % 100, " headers: put that NCCL or a newer ", header / 100,
               ".x first on the library path (LD_LIBRARY_PATH), or rebuild Tandem against this "
               "one");
}

}  // namespace tandem::parallel
