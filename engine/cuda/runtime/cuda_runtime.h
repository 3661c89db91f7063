#pragma once
/// CUDA's device runtime (engine/device_runtime.h, Note [Runtime apart from kernels]): the caching
/// allocator of each GPU, how many there are, their current streams, timing marks, and waiting for
/// them. It names libcudart alone, so runtime_for(Device::cuda(k)) works on the fake runtime of
/// tests/engine/cuda/runtime as it does on a GPU; the kernels (engine/cuda/cuda_backend.h) sit on
/// top.

#include "engine/device_runtime.h"

namespace tandem::cuda {

class CudaRuntime final : public DeviceRuntime {
 public:
  Allocator& allocator(Device device) override;
  int device_count() override;
  std::unique_ptr<TimingMark> mark_time(Device device) override;
  StreamRef current_stream(Device device) override;
  void wait_for(const StreamRef& producer) override;

 private:
  void synchronize_device(Device device) override;
};

/// The process's CUDA runtime (what tandem::cuda_runtime() and runtime_for() return).
CudaRuntime& runtime();

}  // namespace tandem::cuda
