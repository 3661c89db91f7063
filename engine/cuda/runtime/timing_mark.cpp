#include "engine/cuda/runtime/timing_mark.h"

#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/error.h"

namespace tandem::cuda {
namespace {

// An Event is made on the device current at its creation.
Event timing_event(int device) {
  const DeviceGuard guard(device);
  return Event(/*enable_timing=*/true);
}

class CudaTimingMark final : public TimingMark {
 public:
  explicit CudaTimingMark(int device) : device_(device), event_(timing_event(device)) {
    event_.record(current_stream(device), device);
  }

  double elapsed_ms(const TimingMark& later) const override {
    const auto* other = dynamic_cast<const CudaTimingMark*>(&later);
    TANDEM_CHECK(other != nullptr && other->device_ == device_, "[timing] a mark of cuda:", device_,
                 " compared with one of another device");
    const DeviceGuard guard(device_);
    // cudaEventElapsedTime needs both events passed; the earlier one is, once the later one is.
    if (!other->event_.query()) {
      tandem::detail::count_device_sync();
      other->event_.synchronize();
    }
    return event_.elapsed_ms(other->event_);
  }

 private:
  int device_;
  Event event_;
};

}  // namespace

std::unique_ptr<TimingMark> mark_time(int device) {
  return std::make_unique<CudaTimingMark>(device);
}

}  // namespace tandem::cuda
