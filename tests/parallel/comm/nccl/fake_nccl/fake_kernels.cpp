// The kernel launchers the NCCL group calls (engine/cuda/kernels/ordered_keys.cu), for the fake
// CUDA runtime: each queues a work item on its stream as a launch does, checks the launch as the
// real ones do, and traces itself in the FakeNccl of trace_kernels_in(), so that a test sees the
// kernels in order among the NCCL calls. No key is computed (the fake device memory holds no
// bytes): the bodies are tested on a CPU grid (tests/engine/cuda/kernels).

#include <atomic>
#include <string>

#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/runtime/cuda_check.h"
#include "tests/parallel/comm/nccl/fake_nccl/fake_nccl.h"
#include "tests/support/fake_cuda/fake_cuda_runtime.h"

namespace tandem::parallel::testing {
namespace {

std::atomic<FakeNccl*> traced_in{nullptr};

void trace(const std::string& what, const void* in, const void* out, cudaStream_t stream) {
  fake_cuda::launch(stream);
  CUDA_CHECK_LAUNCH();
  if (FakeNccl* nccl = traced_in.load()) nccl->kernel(what, in, out, stream);
}

}  // namespace

void trace_kernels_in(FakeNccl* nccl) {
  traced_in.store(nccl);
}

}  // namespace tandem::parallel::testing

namespace tandem::cuda::kernels {

void to_ordered_keys(const void* in, DType type, KeyReduction reduction, uint32_t* keys, int64_t n,
                     cudaStream_t stream) {
  parallel::testing::trace(std::string("to_ordered_keys ") + std::to_string(n) + " " +
                               dtype_name(type) +
                               (reduction == KeyReduction::Max ? " max" : " min"),
                           in, keys, stream);
}

void from_ordered_keys(const uint32_t* keys, DType type, void* out, int64_t n,
                       cudaStream_t stream) {
  parallel::testing::trace(
      std::string("from_ordered_keys ") + std::to_string(n) + " " + dtype_name(type), keys, out,
      stream);
}

}  // namespace tandem::cuda::kernels
