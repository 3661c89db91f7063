#pragma once
/// The CUDA timing marks of DeviceRuntime::mark_time() (Note [Timing marks] in
/// engine/device_runtime.h).

#include <memory>

#include "engine/device_runtime.h"

namespace tandem::cuda {

/// A timing event of `device` recorded on the calling thread's current stream of it (Note
/// [Current stream] in stream.h). Reading it against a later mark of the same device waits for
/// that mark's work only when it has not run yet, and counts that wait (Note [Counting device
/// synchronisations]).
std::unique_ptr<TimingMark> mark_time(int device);

}  // namespace tandem::cuda
