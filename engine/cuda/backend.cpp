// The CUDA entry points of engine/backend.h, and the device-level methods of the backend.

#include <cstdlib>
#include <string_view>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/cuda_check.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/cuda/runtime/timing_mark.h"

namespace tandem {
namespace {

bool env_flag(const char* name, bool fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || value[0] == '\0') return fallback;
  const std::string_view text(value);
  return !(text == "0" || text == "false" || text == "off" || text == "no");
}

}  // namespace

namespace cuda {

CudaBackend::CudaBackend()
    : allow_tf32_(env_flag("TANDEM_ALLOW_TF32", false)),
      cudnn_benchmark_(env_flag("TANDEM_CUDNN_BENCHMARK", true)) {}

Allocator& CudaBackend::allocator(Device device) {
  TANDEM_CHECK(device.is_cuda(), "[cuda] allocator asked for ", device);
  return caching_allocator(device.index);
}

int CudaBackend::device_count() {
  return cuda::device_count();
}

void CudaBackend::synchronize_device(Device device) {
  TANDEM_CHECK(device.is_cuda(), "[synchronize] CUDA backend asked for ", device);
  DeviceGuard guard(device.index);
  CUDA_CHECK(cudaDeviceSynchronize());
}

std::unique_ptr<TimingMark> CudaBackend::mark_time(Device device) {
  TANDEM_CHECK(device.is_cuda(), "[mark_time] CUDA backend asked for ", device);
  return cuda::mark_time(device.index);
}

StreamRef CudaBackend::current_stream(Device device) {
  TANDEM_CHECK(device.is_cuda(), "[current_stream] CUDA backend asked for ", device);
  return {.device = device, .stream = cuda::current_stream(device.index)};
}

void CudaBackend::wait_for(const StreamRef& producer) {
  TANDEM_CHECK(producer.device.is_cuda(), "[wait_for] CUDA backend asked for ", producer.device);
  const int index = producer.device.index;
  stream_wait_stream(cuda::current_stream(index), index, static_cast<cudaStream_t>(producer.stream),
                     index);
}

CudaBackend& backend() {
  static auto* instance = new CudaBackend();  // Note [Leaked singletons]
  return *instance;
}

}  // namespace cuda

Backend& cuda_backend() {
  return cuda::backend();
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
