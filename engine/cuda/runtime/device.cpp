#include "engine/cuda/runtime/device.h"

#include <cuda.h>

#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <utility>
#include <vector>

#include "engine/cuda/runtime/cuda_check.h"

namespace tandem::cuda {
namespace {

// The oldest Linux driver branch that runs each CUDA major version (CUDA release notes).
const char* minimum_driver(int cuda_major) {
  switch (cuda_major) {
    case 13: return "R580";
    case 12: return "R525";
    default: return "a newer one";
  }
}

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string read_text(const char* path) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

const detail::DeviceProbe& cached_probe() noexcept {
  static const detail::DeviceProbe result = detail::probe_devices();
  return result;
}

// cuDevicePrimaryCtxGetState through the runtime (Note [Device contexts]): the engine does not
// link the driver library itself.
struct DriverContextApi {
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDevicePrimaryCtxGetState) get_state = nullptr;
};

template <typename Function>
Function driver_function(const char* symbol) noexcept {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(symbol, &function, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<Function>(function);
}

const DriverContextApi& driver_context_api() noexcept {
  static const DriverContextApi api{
      driver_function<decltype(&cuDeviceGet)>("cuDeviceGet"),
      driver_function<decltype(&cuDevicePrimaryCtxGetState)>("cuDevicePrimaryCtxGetState")};
  return api;
}

// Back to `previous` after a guard, unless that would create its context. Never throws.
void restore_device(int previous) noexcept {
  if (has_context(previous) && cudaSetDevice(previous) != cudaSuccess) cudaGetLastError();
}

}  // namespace

namespace detail {

// cudaGetDeviceCount is the first runtime call. Without a driver (no libcuda) the runtime
// reports driver version 0; a driver but no device gives cudaErrorNoDevice; a driver too old for
// this build's CUDA gives cudaErrorInsufficientDriver. The first two mean "no device"; the last,
// and any other failure with a driver present, mean a GPU machine that cannot run this build,
// which must not pass for a machine without GPUs (Note [Fail, don't skip] in
// tests/support/cuda_skip.h). The errors are not sticky, but they are the runtime's last error,
// so they are cleared for whoever checks cudaGetLastError() next.
DeviceProbe probe_devices() noexcept {
  DeviceProbe result;
  int driver_version = 0;
  if (cudaDriverGetVersion(&driver_version) != cudaSuccess) {
    cudaGetLastError();
    driver_version = 0;
  }
  cudaError_t status = cudaSuccess;
  if (driver_version > 0) {
    status = cudaGetDeviceCount(&result.count);
    if (status != cudaSuccess) {
      cudaGetLastError();
      result.count = 0;
    }
  }
  if (result.count == 0) {
    result.reason = unavailable_reason(driver_version, status,
                                       driver_release(read_text("/proc/driver/nvidia/version")));
  }
  return result;
}

std::string unavailable_reason(int driver_cuda_version, cudaError_t status,
                               std::string_view driver_release) {
  if (driver_cuda_version == 0) {
    return "no CUDA device: no NVIDIA driver is installed (libcuda.so not found)";
  }
  if (status == cudaSuccess) return "no CUDA device: the driver reports 0 devices";
  if (status == cudaErrorNoDevice) {
    return std::string("no CUDA device: ") + cudaGetErrorString(status) + " (cudaErrorNoDevice)";
  }
  const std::string driver = driver_release.empty()
                                 ? std::string("the NVIDIA driver")
                                 : "NVIDIA driver " + std::string(driver_release);
  const std::string supports = cuda_version_text(driver_cuda_version);
  if (status == cudaErrorInsufficientDriver) {
    return "CUDA is unusable: " + driver + " supports CUDA up to " + supports +
           ", but this build uses CUDA " + cuda_version_text(CUDART_VERSION) +
           ", which needs driver " + minimum_driver(CUDART_VERSION / 1000) +
           " or newer: update the driver, or rebuild Tandem with a CUDA toolkit it supports";
  }
  return std::string("CUDA is unusable: ") + cudaGetErrorName(status) + ": " +
         cudaGetErrorString(status) + " (" + driver + ", supporting CUDA up to " + supports + ")";
}

// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 ..." (or "... Open
// Kernel Module for x86_64  580.65.06 ..."): the first word after "Module" made of digits and
// dots.
std::string driver_release(std::string_view proc_version_text) {
  const size_t module = proc_version_text.find("Module");
  std::istringstream words(
      std::string(proc_version_text.substr(module == std::string_view::npos ? 0 : module)));
  std::string word;
  while (words >> word) {
    const bool version = word.find('.') != std::string::npos &&
                         word.find_first_not_of("0123456789.") == std::string::npos;
    if (version) return word;
  }
  return "";
}

}  // namespace detail

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

bool has_context(int device) noexcept {
  const DriverContextApi& api = driver_context_api();
  CUdevice handle = 0;
  unsigned int flags = 0;
  int active = 0;
  if (api.device_get == nullptr || api.get_state == nullptr ||
      api.device_get(&handle, device) != CUDA_SUCCESS ||
      api.get_state(handle, &flags, &active) != CUDA_SUCCESS) {
    return true;  // unknown: restoring is what a guard does
  }
  return active != 0;
}

DeviceGuard::DeviceGuard(int device) : previous_(current_device()), changed_(previous_ != device) {
  if (changed_) set_device(device);
}

DeviceGuard::~DeviceGuard() {
  if (changed_) restore_device(previous_);
}

QuietDeviceGuard::QuietDeviceGuard(int device) noexcept {
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  if (current != device) {
    if (cudaSetDevice(device) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    previous_ = current;
    changed_ = true;
  }
  active_ = true;
}

QuietDeviceGuard::~QuietDeviceGuard() {
  if (changed_) restore_device(previous_);
}

bool enable_peer_access(int device, int peer) {
  if (device == peer) return true;
  check_device(device, "peer access");
  check_device(peer, "peer access");
  static std::mutex mutex;
  static std::map<std::pair<int, int>, bool> enabled;  // per ordered pair: whether it could be
  std::lock_guard lock(mutex);
  const auto known = enabled.find({device, peer});
  if (known != enabled.end()) return known->second;
  int can_access = 0;
  CUDA_CHECK(cudaDeviceCanAccessPeer(&can_access, device, peer));
  if (can_access != 0) {
    const DeviceGuard guard(device);
    const cudaError_t status = cudaDeviceEnablePeerAccess(peer, 0);
    if (status == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();  // by other code in this process: as good
    } else {
      CUDA_CHECK(status);
    }
  }
  enabled.emplace(std::pair(device, peer), can_access != 0);
  return can_access != 0;
}

}  // namespace tandem::cuda
