#pragma once
/// A count of host reads of tensor values, for tests that keep the training step free of them.
///
/// Note [Counting host reads]: reading a tensor's values on the host (to_vector, item) makes a
/// GPU's host wait until every kernel queued before it has run, so the GPU idles while the host
/// queues the next step (Note [Host syncs] in apps/train_cifar/pending_steps.h). A CPU pays nothing
/// for the same read, so a mistake of that kind is invisible on the machines where the tests
/// run. Every read therefore counts here, on every device: to_vector and item of a CPU tensor,
/// and every copy from a GPU to the host (to_vector, item, to(cpu): each waits for the stream).
/// A test on CPUs counts the reads of a few training steps and so finds each one a GPU would
/// wait for (batch norm's counter, say); the same test on a GPU counts the real copies.
/// One process-wide relaxed counter, as PyTorch's sync debug mode is process-wide; it is only
/// ever compared before and after the code under test.

#include <cstdint>

namespace tandem {

/// Host reads of tensor values made by this process so far, on any device.
int64_t host_read_count();

namespace detail {
/// Called where a tensor's values reach the host: to_vector of a CPU tensor, a device→host copy.
void count_host_read();
}  // namespace detail

}  // namespace tandem
