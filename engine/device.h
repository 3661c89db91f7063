#pragma once
/// Device = {CPU | CUDA} × index. Several CPU devices (cpu:0, cpu:1) share host
/// memory but are distinct for dispatch and autograd: each gets its own
/// backward worker thread, which is how DataParallel runs on CPU-only machines.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace tandem {

enum class DeviceType { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu(int index = 0) { return {DeviceType::CPU, index}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }

  /// Parses "cpu", "cpu:1", "cuda", "cuda:0"; throws tandem::Error otherwise.
  static Device parse(std::string_view text);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;

  friend bool operator==(const Device&, const Device&) = default;
};

std::ostream& operator<<(std::ostream& out, const Device& device);

/// Makes `device` the calling thread's CUDA device for good, for a thread that works for one
/// device (the autograd worker of cuda:k): its device guards then switch nothing, and it makes
/// no context on another GPU (Note [Device contexts] in engine/cuda/runtime/device.h). Nothing for
/// a CPU device. Never throws: a device that cannot be made current reports its error at the
/// thread's first CUDA call. Defined by engine/cuda, or by engine/no_cuda (where it does nothing).
void bind_thread_to(Device device) noexcept;

}  // namespace tandem

template <>
struct std::hash<tandem::Device> {
  size_t operator()(const tandem::Device& d) const noexcept {
    return std::hash<int>()(d.index * 2 + (d.type == tandem::DeviceType::CUDA ? 1 : 0));
  }
};
