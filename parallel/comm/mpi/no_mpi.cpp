// A build without MPI has no MPI process group: every entry point says so in one line, with
// how to get it (as no_nccl.cpp does for NCCL).
#include "engine/error.h"
#include "parallel/comm/mpi/mpi_process_group.h"

namespace tandem::parallel {
namespace {

[[noreturn]] void no_mpi() {
  TANDEM_FAIL(
      "[mpi] this build has no MPI backend: install Open MPI (apt-get install libopenmpi-dev "
      "openmpi-bin, or scripts/install_deps.sh) and configure again (the summary then shows "
      "✓ MPI); or use --backend gloo");
}

}  // namespace

bool mpi_available() {
  return false;
}

DistributedEnv mpi_environment() {
  no_mpi();
}

std::shared_ptr<ProcessGroup> make_mpi_process_group(const DistributedEnv&,
                                                     ProcessGroupOptions) {  // NOLINT
  no_mpi();
}

}  // namespace tandem::parallel
