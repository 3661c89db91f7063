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

}  // namespace tandem

template <>
struct std::hash<tandem::Device> {
  size_t operator()(const tandem::Device& d) const noexcept {
    return std::hash<int>()(d.index * 2 + (d.type == tandem::DeviceType::CUDA ? 1 : 0));
  }
};
