// The one libcudart function nccl_collectives.cpp calls beyond those of the fake CUDA runtime
// (tests/support/fake_cuda): the rank's own part of gather, scatter and alltoall. It is queued as a
// work item like a kernel.
// Delete this file once the fake runtime defines cudaMemcpyAsync itself.
#include <cuda_runtime_api.h>

#include "tests/support/fake_cuda/fake_cuda_runtime.h"

cudaError_t cudaMemcpyAsync(void* /*dst*/, const void* /*src*/, size_t /*count*/,
                            cudaMemcpyKind /*kind*/, cudaStream_t stream) {
  tandem::fake_cuda::launch(stream);
  return cudaSuccess;
}
