#pragma once
/// CUDA devices: how many there are (never throwing, so a machine without a GPU or driver simply
/// has none, and one whose driver cannot run this build says so), the current device of the
/// calling thread, cached properties, DeviceGuard, which sets a device for a scope, and peer
/// access between devices.
///
/// Note [Device contexts]: since CUDA 12, making a device current (cudaSetDevice) creates its
/// primary context: hundreds of MiB of GPU memory, and under EXCLUSIVE_PROCESS compute mode a
/// failure when another process holds the device. A new thread's current device is 0, so a guard
/// that "restores" it would create a context on GPU 0 in every DDP rank. Hence:
/// - threads that work for one device set it once (bind_thread_to_cuda_device in
///   engine/device.h: the autograd worker of cuda:k; set_device(local_rank) for a DDP rank), so
///   their guards switch nothing;
/// - DeviceGuard (and the allocators' own switches, which cannot throw) restore the previous
///   device only when it already has a context (cuDevicePrimaryCtxGetState); otherwise the
///   thread stays on the guard's device;
/// - a switch that may fail where failing is not an error (a destructor) clears the runtime's
///   last error, which CUDA_CHECK_LAUNCH() would otherwise blame on the next kernel.

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

namespace tandem::cuda {

/// Number of visible CUDA devices; 0 when there is no driver, no device, or a driver this build
/// cannot use. Never throws. Probed once per process.
int device_count() noexcept;

/// Why device_count() is 0, in one line; empty otherwise. It starts with "no CUDA device: " when
/// there is no driver or no device, and with "CUDA is unusable: " when a driver is present but
/// cannot run this build (too old for its CUDA version, say), naming the driver's version and
/// what is needed.
const std::string& unavailable_reason() noexcept;

/// Throws "[cuda] <unavailable_reason()> ..." or "[<op>] cuda:<i> does not exist ..." unless
/// `device` names a visible device.
void check_device(int device, const char* op);

/// The calling thread's current device (cudaGetDevice).
int current_device();
/// Makes `device` the calling thread's current device (creates its context).
void set_device(int device);

/// cudaGetDeviceProperties, queried once per device.
const cudaDeviceProp& device_properties(int device);

/// Whether `device` has an active primary context in this process (true when the driver cannot
/// say). Never throws.
bool has_context(int device) noexcept;

/// Makes `device` current for the scope and restores the previous device afterwards, unless the
/// previous one has no context (Note [Device contexts]). Cheap when the device is already
/// current (no cudaSetDevice call).
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

/// DeviceGuard for code that must not throw (destructors, deallocate()): when `device` cannot
/// be made current, the thread stays where it is, the error is cleared and active() is false.
class QuietDeviceGuard {
 public:
  explicit QuietDeviceGuard(int device) noexcept;
  ~QuietDeviceGuard();
  QuietDeviceGuard(const QuietDeviceGuard&) = delete;
  QuietDeviceGuard& operator=(const QuietDeviceGuard&) = delete;
  /// Whether the guard's device is current.
  bool active() const { return active_; }

 private:
  int previous_ = -1;
  bool changed_ = false;
  bool active_ = false;
};

/// Lets `device` reach `peer`'s memory directly (cudaDeviceEnablePeerAccess), so that copies
/// between them are not staged through the host. Enabled once per ordered pair, on first use;
/// returns false where the two GPUs cannot access each other (copies then still work, staged).
bool enable_peer_access(int device, int peer);

namespace detail {

struct DeviceProbe {
  int count = 0;
  std::string reason;  ///< unavailable_reason()
};
/// What device_count() and unavailable_reason() cache, asked again.
DeviceProbe probe_devices() noexcept;
/// The one-line reason for no devices, from cudaDriverGetVersion's `driver_cuda_version` (0:
/// no driver), cudaGetDeviceCount's `status`, and the driver's release ("580.65.06"; empty when
/// unknown).
std::string unavailable_reason(int driver_cuda_version, cudaError_t status,
                               std::string_view driver_release);
/// The driver release in the text of /proc/driver/nvidia/version; empty if there is none.
std::string driver_release(std::string_view proc_version_text);

}  // namespace detail
}  // namespace tandem::cuda
