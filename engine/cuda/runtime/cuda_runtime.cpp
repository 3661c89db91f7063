// CUDA's DeviceRuntime, and the engine-wide CUDA entry points of engine/device_runtime.h and
// engine/device.h (cuda_available, cuda_unavailable_reason, bind_thread_to).

#include "engine/cuda/runtime/cuda_runtime.h"

#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/cuda_check.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/cuda/runtime/timing_mark.h"

namespace tandem {
namespace cuda {

Allocator& CudaRuntime::allocator(Device device) {
  TANDEM_CHECK(device.is_cuda(), "[cuda] allocator asked for ", device);
  return caching_allocator(device.index);
}

int CudaRuntime::device_count() {
  return cuda::device_count();
}

void CudaRuntime::synchronize_device(Device device) {
  TANDEM_CHECK(device.is_cuda(), "[synchronize] CUDA runtime asked for ", device);
  DeviceGuard guard(device.index);
  CUDA_CHECK(cudaDeviceSynchronize());
}

std::unique_ptr<TimingMark> CudaRuntime::mark_time(Device device) {
  TANDEM_CHECK(device.is_cuda(), "[mark_time] CUDA runtime asked for ", device);
  return cuda::mark_time(device.index);
}

StreamRef CudaRuntime::current_stream(Device device) {
  TANDEM_CHECK(device.is_cuda(), "[current_stream] CUDA runtime asked for ", device);
  return {.device = device, .stream = cuda::current_stream(device.index)};
}

void CudaRuntime::wait_for(const StreamRef& producer) {
  TANDEM_CHECK(producer.device.is_cuda(), "[wait_for] CUDA runtime asked for ", producer.device);
  const int index = producer.device.index;
  stream_wait_stream(cuda::current_stream(index), index, static_cast<cudaStream_t>(producer.stream),
                     index);
}

CudaRuntime& runtime() {
  static auto* instance = new CudaRuntime();  // Note [Leaked singletons]
  return *instance;
}

}  // namespace cuda

DeviceRuntime& cuda_runtime() {
  return cuda::runtime();
}

bool cuda_available() {
  return cuda::device_count() > 0;
}

std::string cuda_unavailable_reason() {
  return cuda::unavailable_reason();
}

void bind_thread_to(Device device) noexcept {
  if (!device.is_cuda()) return;
  try {
    cuda::set_device(device.index);
  } catch (const Error&) {
    // The thread's first CUDA call on the device reports the same failure, where it matters.
  }
}

}  // namespace tandem
