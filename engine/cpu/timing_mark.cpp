// The CPU's timing marks (Note [Timing marks] in engine/device_runtime.h): the host clock, since
// CPU work is done when the call that queued it returns.

#include <chrono>

#include "engine/cpu/cpu_backend.h"
#include "engine/elapsed.h"

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

std::unique_ptr<TimingMark> CpuBackend::mark_time(Device) {
  return std::make_unique<HostTimingMark>();
}

}  // namespace tandem::cpu
