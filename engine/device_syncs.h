#pragma once
/// A count of the host's waits for a device, for tests that keep timed loops free of them.
///
/// Note [Counting device synchronisations]: DeviceRuntime::synchronize() blocks a GPU's host
/// until every kernel queued before it has run, so the GPU idles while the host queues the next
/// work: a loop that synchronises every step (to time its phases, say) measures host time plus
/// device time instead of their overlap. The CPU pays nothing for the call, so such a loop looks
/// as fast as one without on the machines where the tests run. As with host reads (Note
/// [Counting host reads] in host_reads.h), every call therefore counts here, on every device
/// type, and so does every read of a TimingMark that had to wait for its device; a test on CPUs
/// counts them around the code under test. One process-wide relaxed counter, only ever compared
/// before and after.

#include <cstdint>

namespace tandem {

/// Host waits for a device made by this process so far, on any device type.
int64_t device_sync_count();

namespace detail {
/// Called by DeviceRuntime::synchronize() and by timing reads that wait.
void count_device_sync();
}  // namespace detail

}  // namespace tandem
