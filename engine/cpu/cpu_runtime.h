#pragma once
/// The CPU's device runtime (engine/device_runtime.h, Note [Runtime apart from kernels]): the host
/// allocator, an unbounded number of virtual devices, no streams, and nothing to wait for, since
/// CPU work is done when the call that queued it returns. The kernels are engine/cpu/cpu_backend.h.

#include "engine/device_runtime.h"

namespace tandem::cpu {

class CpuRuntime final : public DeviceRuntime {
 public:
  Allocator& allocator(Device device) override;
  int device_count() override;
  /// The host clock now (Note [Timing marks]).
  std::unique_ptr<TimingMark> mark_time(Device device) override;
  StreamRef current_stream(Device device) override { return {.device = device}; }
  void wait_for(const StreamRef&) override {}

 private:
  void synchronize_device(Device) override {}  // CPU work is done when its call returns
};

CpuRuntime& runtime();

}  // namespace tandem::cpu
