#include "engine/cuda/device.h"

#include <memory>
#include <mutex>
#include <vector>

#include "engine/cuda/cuda_check.h"

namespace tandem::cuda {
namespace {

struct Probe {
  int count = 0;
  std::string reason;
};

// CudaGetDeviceCount is the first runtime call and fails in
// several ways on machines without a GPU (no libcuda: cudaErrorInsufficientDriver; a driver but
// no device: cudaErrorNoDevice; a broken driver: cudaErrorInitializationError). All of them
// mean "no device" to Tandem. The error is not sticky, but it is the runtime's last error, so
// it is cleared for whoever checks cudaGetLastError() next.
Probe probe() noexcept {
  Probe result;
  int driver_version = 0;
  if (cudaDriverGetVersion(&driver_version) != cudaSuccess || driver_version == 0) {
    cudaGetLastError();
    result.reason = "no CUDA device: no NVIDIA driver is installed (libcuda.so not found)";
    return result;
  }
  const cudaError_t status = cudaGetDeviceCount(&result.count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    result.count = 0;
    result.reason = std::string("no CUDA device: ") + cudaGetErrorString(status) + " (" +
                    cudaGetErrorName(status) + ")";
  } else if (result.count == 0) {
    result.reason = "no CUDA device: the driver reports 0 devices";
  }
  return result;
}

const Probe& cached_probe() noexcept {
  static const Probe result = probe();
  return result;
}

}  // namespace

int device_count() noexcept {
  return cached_probe().count;
}

const std::string& unavailable_reason() noexcept {
  return cached_probe().reason;
}

void check_device(int device, const char* op) {
  const int count = device_count();
  // "[cuda]" whatever the op: the message is about the machine, like the CPU-only build's.
  TANDEM_CHECK(count > 0, "[cuda] ", unavailable_reason(), " (needed by ", op, ")");
  TANDEM_CHECK(device >= 0 && device < count, "[", op, "] cuda:", device,
               " does not exist: this machine has ", count, " CUDA device(s)");
}

int current_device() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

void set_device(int device) {
  check_device(device, "set_device");
  CUDA_CHECK(cudaSetDevice(device));
}

const cudaDeviceProp& device_properties(int device) {
  check_device(device, "device_properties");
  static std::mutex mutex;
  static std::vector<std::unique_ptr<cudaDeviceProp>> cache(static_cast<size_t>(device_count()));
  std::lock_guard lock(mutex);
  auto& slot = cache[static_cast<size_t>(device)];
  if (!slot) {
    auto properties = std::make_unique<cudaDeviceProp>();
    CUDA_CHECK(cudaGetDeviceProperties(properties.get(), device));
    slot = std::move(properties);
  }
  return *slot;
}

DeviceGuard::DeviceGuard(int device) : previous_(current_device()), changed_(previous_ != device) {
  if (changed_) set_device(device);
}

DeviceGuard::~DeviceGuard() {
  // Destructors never throw: a failure to switch back leaves the device as it is.
  if (changed_) cudaSetDevice(previous_);
}

}  // namespace tandem::cuda
