#include "parallel/comm/nccl/nccl_work.h"

#include <thread>

#include "engine/cuda/runtime/cuda_check.h"
#include "engine/cuda/runtime/device.h"
#include "parallel/comm/socket.h"

namespace tandem::parallel {
namespace {

using std::chrono::milliseconds;

// How often a host blocked in Work::synchronize() polls the end event once the first couple of
// milliseconds of yielding are over (Note [NCCL stream order]).
constexpr auto kSynchronizePoll = std::chrono::microseconds(100);

}  // namespace

void pause_between_polls(NcclWork::Clock::time_point start, NcclWork::Clock::duration pause) {
  if (NcclWork::Clock::now() - start < std::chrono::milliseconds(2)) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(pause);
  }
}

NcclWork::NcclWork(std::string description, milliseconds timeout, int device,
                   bool host_blocking_wait)
    : Work(std::move(description), timeout),
      device_(device),
      host_blocking_wait_(host_blocking_wait),
      start_(cuda::Event::pooled(device)),
      end_(cuda::Event::pooled(device)) {}

void NcclWork::wait(milliseconds timeout) {
  if (host_blocking_wait_) return synchronize(timeout);
  if (failed()) Work::synchronize(timeout);  // rethrows the error at once
  order_current_stream();
}

void NcclWork::synchronize(milliseconds timeout) {
  wait_for_end_event(timeout);
  finish_synchronize(timeout);  // rethrows the error, or says the timeout passed
  order_current_stream();
}

// The host polls the end event itself (Note [NCCL stream order]), so it does not wait for the
// watchdog's next pass (up to one watchdog poll more per host-blocking collective). Polled, not
// cudaEventSynchronize: a collective that never ends still ends this wait, when the watchdog fails
// the Work or at `timeout`. Completing the Work here is safe for the reason given at completed().
void NcclWork::wait_for_end_event(milliseconds timeout) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = net::deadline_after(timeout);
  const cuda::DeviceGuard guard(device_);  // no context on another GPU for an unbound thread
  while (!Work::completed() && Clock::now() < deadline) {
    if (recorded_ && end_.query()) return mark_completed();  // ignored when it failed first
    pause_between_polls(start, kSynchronizePoll);
  }
}

void NcclWork::order_current_stream() const {
  if (!recorded_) return;
  const cuda::DeviceGuard guard(device_);
  CUDA_CHECK(cudaStreamWaitEvent(cuda::current_stream(device_), end_.handle(), 0));
}

}  // namespace tandem::parallel
