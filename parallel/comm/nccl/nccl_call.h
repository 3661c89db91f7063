#pragma once
// NcclCall: one operation as the NCCL group launches it (Note [NCCL stream order] in
// nccl_process_group.h). Internal to the NCCL group (it names NCCL's types); not installed.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <functional>

#include "parallel/comm/nccl/nccl_api.h"

namespace tandem::parallel {

struct NcclCall {
  /// Queues NCCL calls (and device copies) inside one ncclGroupStart/End on (comm, stream);
  /// returns the first failure.
  std::function<ncclResult_t(NcclApi& nccl, ncclComm_t comm, cudaStream_t stream)> collective;
  /// Queue kernels on the stream before the group opens and after it ends (may be empty). Not
  /// inside it: NCCL queues a group's calls only at ncclGroupEnd, so a kernel queued inside the
  /// group would run before them whatever the order of the calls.
  std::function<void(cudaStream_t stream)> before = nullptr;
  std::function<void(cudaStream_t stream)> after = nullptr;
};

}  // namespace tandem::parallel
