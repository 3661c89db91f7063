#pragma once
/// CUDA devices: how many there are (never throwing, so a machine without a GPU
/// or driver simply has none), the current device of the calling thread, cached
/// properties, and DeviceGuard, which sets a device for a scope.

#include <cuda_runtime_api.h>

#include <string>

namespace tandem::cuda {

/// Number of visible CUDA devices; 0 when there is no driver or no device. Never throws.
/// Probed once per process.
int device_count() noexcept;

/// Why device_count() is 0, in one line ("no CUDA device: <driver message>"); empty otherwise.
const std::string& unavailable_reason() noexcept;

/// Throws "[cuda] no CUDA device: ..." or "[<op>] cuda:<i> does not exist ..." unless `device`
/// names a visible device.
void check_device(int device, const char* op);

/// The calling thread's current device (cudaGetDevice).
int current_device();
void set_device(int device);

/// cudaGetDeviceProperties, queried once per device.
const cudaDeviceProp& device_properties(int device);

/// Makes `device` current for the scope and restores the previous device afterwards. Cheap when
/// the device is already current (no cudaSetDevice call).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
  bool changed_;
};

}  // namespace tandem::cuda
