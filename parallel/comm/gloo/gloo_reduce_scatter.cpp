#include "parallel/comm/gloo/gloo_reduce_scatter.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <cstring>
#include <vector>

#include "engine/error.h"

namespace tandem::parallel {
namespace {

// The top byte of this algorithm's Gloo slots; Gloo's own collectives use 0x01..0x08, and
// point-to-point operations 0 (Note [Gloo point-to-point]).
constexpr uint8_t kReduceScatterSlotPrefix = 0x40;

void wait_for(bool (gloo::transport::UnboundBuffer::*wait)(int*, std::chrono::milliseconds),
              gloo::transport::UnboundBuffer& buffer,
              std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  // Gloo itself throws on a timeout (after breaking the context); false means aborted.
  TANDEM_CHECK((buffer.*wait)(nullptr, std::max(left, std::chrono::milliseconds(1))),
               "reduce_scatter was aborted");
}

}  // namespace

// Note [Ring reduce-scatter]: Gloo 0.5 has no reduce-scatter for its new-style options (PyTorch
// 1.13's Gloo group refuses reduce_scatter), and an all-reduce would move twice the bytes. So
// the classic ring, on Gloo's unbound buffers: in step s (0..size-2) rank r sends its partial
// reduction of chunk (r-s-1) mod size to rank r+1 (at step 0, its own input chunk) and receives
// the partial of chunk (r-s-2) mod size from rank r-1, which it combines with its own input
// chunk; the last step's chunk is r, combined straight into the output. Each rank sends and
// receives (size-1)·n elements, the minimum. Chunk c is summed from rank c+1 round the ring to
// rank c: ((x[c+1] ⊕ x[c+2]) ⊕ ...) ⊕ x[c]; floats therefore round differently from an
// all-reduce's order (within float rounding of it). Two scratch chunks alternate: one being
// received into while the other (last step's partial) is being sent.
void ring_reduce_scatter(const std::shared_ptr<gloo::Context>& context, const Tensor& output,
                         const Tensor& input, const HostReduceFunction& reduce, uint32_t tag,
                         std::chrono::milliseconds timeout) {
  const int size = context->size;
  const int rank = context->rank;
  const size_t bytes = output.nbytes();
  const auto* in = static_cast<const uint8_t*>(input.data_ptr());
  const auto chunk = [&](int c) {
    return const_cast<uint8_t*>(in) + static_cast<size_t>(c) * bytes;
  };
  if (size == 1) {
    std::memcpy(output.data_ptr(), in, bytes);
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, tag);
  const int right = (rank + 1) % size;
  const int left = (rank + size - 1) % size;
  const auto n = static_cast<size_t>(output.numel());
  std::vector<uint8_t> partials[2] = {std::vector<uint8_t>(bytes), std::vector<uint8_t>(bytes)};
  uint8_t* sending = chunk(left);  // step 0 sends this rank's own chunk r-1
  for (int step = 0; step + 1 < size; ++step) {
    const int received_chunk = (rank - step - 2 + 2 * size) % size;
    uint8_t* receiving = partials[step % 2].data();
    auto recv = context->createUnboundBuffer(receiving, bytes);
    auto send = context->createUnboundBuffer(sending, bytes);
    recv->recv(left, slot);
    send->send(right, slot);
    wait_for(&gloo::transport::UnboundBuffer::waitRecv, *recv, deadline);
    const bool last = step + 2 == size;
    reduce(last ? output.data_ptr() : receiving, receiving, chunk(received_chunk), n);
    wait_for(&gloo::transport::UnboundBuffer::waitSend, *send, deadline);
    sending = receiving;
  }
}

}  // namespace tandem::parallel
