// The CPU's DeviceRuntime; its timing marks are the host clock (Note [Timing marks] in
// engine/device_runtime.h), since CPU work is done when the call that queued it returns.

#include "engine/cpu/cpu_runtime.h"

#include <chrono>
#include <cstdint>

#include "engine/elapsed.h"
#include "engine/error.h"

namespace tandem::cpu {
namespace {

class HostTimingMark final : public TimingMark {
 public:
  double elapsed_ms(const TimingMark& later) const override {
    const auto* other = dynamic_cast<const HostTimingMark*>(&later);
    TANDEM_CHECK(other != nullptr, "[timing] a CPU mark compared with another device's");
    return milliseconds_between(at_, other->at_);
  }

 private:
  std::chrono::steady_clock::time_point at_ = std::chrono::steady_clock::now();
};

}  // namespace

Allocator& CpuRuntime::allocator(Device) {
  return cpu_allocator();
}

int CpuRuntime::device_count() {
  return INT32_MAX;
}

std::unique_ptr<TimingMark> CpuRuntime::mark_time(Device) {
  return std::make_unique<HostTimingMark>();
}

CpuRuntime& runtime() {
  static CpuRuntime instance;
  return instance;
}

}  // namespace tandem::cpu
