// The Gloo group's isend/irecv (Note [Gloo point-to-point] in gloo_process_group.h): methods of
// GlooProcessGroup, in a file of their own; the threads that wait for them are gloo_waiters.h's.
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <array>
#include <chrono>

#include "engine/error.h"
#include "parallel/comm/gloo/gloo_process_group.h"
#include "parallel/comm/gloo/gloo_waiters.h"

namespace tandem::parallel {

// --- isend / irecv

namespace {

using Buffer = gloo::transport::UnboundBuffer;
using Clock = std::chrono::steady_clock;

// Note [Gloo message header]: Gloo's TCP transport aborts the process (an assertion on its own
// thread) when a message is longer than the receive posted for it, and fills a longer receive
// silently. So every message is two: a header {message id, element count, dtype} on the tag's
// header slot, which the receiver posts at irecv() (headers from one rank on one tag arrive in
// the order sent, and Gloo hands them to the receives in the order posted), then the payload on
// a slot of that message id alone, which the receiver posts once the header has told it who
// sent how much: into the tensor when it matches, else into a scratch buffer, failing the
// receive with one line (the sender's Work succeeds, as with MPI). A payload of no elements is
// not sent. The sender posts both at once: no extra round trip, 24 bytes more per message.
// Slots: the top byte 0x50 (headers) or 0x51 (payloads), then the 24-bit message id (payloads
// only, counted per destination), then the 32-bit tag; Gloo's collectives use 0x01..0x08 and the
// ring reduce-scatter 0x40.
constexpr uint64_t kHeaderSlot = uint64_t{0x50} << 56;
constexpr uint64_t kPayloadSlot = uint64_t{0x51} << 56;
using Header = std::array<int64_t, 3>;  // message id, elements, DType

uint64_t header_slot(int tag) {
  return kHeaderSlot | static_cast<uint32_t>(tag);
}
uint64_t payload_slot(int64_t id, int tag) {
  return kPayloadSlot | (static_cast<uint64_t>(id & 0xFFFFFF) << 32) | static_cast<uint32_t>(tag);
}

std::chrono::milliseconds left_until(Clock::time_point deadline) {
  return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                  std::chrono::milliseconds(1));
}

// A receive whose sender sent something else: the Work fails, the group goes on.
struct Mismatch : Error {
  using Error::Error;
};
// The group was destroyed while the operation waited.
struct Aborted : Error {
  using Error::Error;
};

// The buffers an operation waits on, for the destructor's abort (GlooWaiters): an irecv's
// payload buffer appears only once its header is in.
class Waits {
 public:
  explicit Waits(bool receiving) : receiving_(receiving) {}
  /// Waits for `buffer` (send or receive) until `deadline`; returns the peer's rank.
  int wait(const std::shared_ptr<Buffer>& buffer, Clock::time_point deadline) {
    {
      std::lock_guard lock(mutex_);
      if (aborted_) throw Aborted("the group was destroyed first");
      current_ = buffer;
    }
    int peer = -1;
    const bool done = receiving_ ? buffer->waitRecv(&peer, left_until(deadline))
                                 : buffer->waitSend(&peer, left_until(deadline));
    if (!done) throw Aborted("the group was destroyed first");
    return peer;
  }
  void abort() {
    std::lock_guard lock(mutex_);
    aborted_ = true;
    if (current_ == nullptr) return;
    if (receiving_) current_->abortWaitRecv();
    if (!receiving_) current_->abortWaitSend();
  }

 private:
  const bool receiving_;
  std::mutex mutex_;  // guards what follows
  std::shared_ptr<Buffer> current_;
  bool aborted_ = false;
};

}  // namespace

// Starts a point-to-point operation, or fails `work` at once: when the group is broken, or when
// Gloo refuses to post it (its context already failed).
bool GlooProcessGroup::post(Work& work, const std::function<void()>& start) {
  work.mark_started();
  if (const std::string failure = broken(); !failure.empty()) {
    work.mark_completed(std::make_exception_ptr(
        Error(work.description() + " not run: the group is broken by an earlier failure (" +
              failure + ")")));
    return false;
  }
  try {
    start();
    return true;
  } catch (const std::exception& e) {
    set_broken(message_of(e));
    work.mark_completed(
        std::make_exception_ptr(Error(work.description() + " failed: " + message_of(e))));
    return false;
  }
}

// Runs `body` (the waits) on a waiter thread and completes `work` with its outcome: a Mismatch or
// an abort fails only this Work; any other failure (a timeout, a dead peer) breaks the group, as
// a collective's does.
void GlooProcessGroup::complete_later(const std::shared_ptr<Work>& work, std::function<void()> body,
                                      std::function<void()> abort) {
  waiters_->submit(
      [this, work, body = std::move(body)] {
        try {
          body();
          work->mark_completed();
        } catch (const Mismatch& e) {
          work->mark_completed(
              std::make_exception_ptr(Error(work->description() + " failed: " + e.message())));
        } catch (const Aborted& e) {
          work->mark_completed(std::make_exception_ptr(
              Error(work->description() + " did not complete: " + e.message())));
        } catch (const std::exception& e) {
          set_broken(message_of(e));
          work->mark_completed(
              std::make_exception_ptr(Error(work->description() + " failed: " + message_of(e))));
        }
      },
      std::move(abort));
}

std::shared_ptr<Work> GlooProcessGroup::run_send(Tensor tensor, int dst, int tag) {
  auto work =
      make_work("isend", " (to rank " + std::to_string(dst) + ", tag " + std::to_string(tag) + ")");
  auto header = std::make_shared<Header>(
      Header{next_message_id(dst), tensor.numel(), static_cast<int64_t>(tensor.dtype())});
  std::shared_ptr<Buffer> header_buffer =
      context_->createUnboundBuffer(header->data(), sizeof(Header));
  std::shared_ptr<Buffer> payload;
  if (tensor.numel() > 0)
    payload = context_->createUnboundBuffer(tensor.data_ptr(), tensor.nbytes());
  const bool posted = post(*work, [&] {
    header_buffer->send(dst, header_slot(tag));
    if (payload) payload->send(dst, payload_slot((*header)[0], tag));
  });
  if (!posted) return work;
  auto waits = std::make_shared<Waits>(/*receiving=*/false);
  const auto deadline = Clock::now() + options().timeout;
  complete_later(
      work,
      [waits, header, header_buffer, payload, tensor, deadline] {
        waits->wait(header_buffer, deadline);
        if (payload) waits->wait(payload, deadline);
      },
      [waits] { waits->abort(); });
  return work;
}

std::shared_ptr<Work> GlooProcessGroup::run_recv(Tensor tensor, int src, int tag) {
  auto work = make_work(
      "irecv", src == kAnySource
                   ? " (from any rank, tag " + std::to_string(tag) + ")"
                   : " (from rank " + std::to_string(src) + ", tag " + std::to_string(tag) + ")");
  auto header = std::make_shared<Header>();
  std::shared_ptr<Buffer> header_buffer =
      context_->createUnboundBuffer(header->data(), sizeof(Header));
  std::vector<int> sources;  // Gloo's receive from any of a list of ranks
  for (int r = 0; r < size(); ++r) {
    if (r == src || (src == kAnySource && r != rank())) sources.push_back(r);
  }
  const bool posted = post(*work, [&] {
    if (sources.size() == 1) return header_buffer->recv(sources[0], header_slot(tag));
    header_buffer->recv(sources, header_slot(tag));
  });
  if (!posted) return work;
  auto waits = std::make_shared<Waits>(/*receiving=*/true);
  const auto deadline = Clock::now() + options().timeout;
  complete_later(
      work,
      [this, work, waits, header, header_buffer, tensor, tag, deadline] {
        const int sender = waits->wait(header_buffer, deadline);
        work->set_source_rank(sender);
        const auto [id, count, dtype_code] = *header;
        const auto dtype = static_cast<DType>(dtype_code);
        const bool fits = count == tensor.numel() && dtype == tensor.dtype();
        if (count > 0) {
          std::vector<uint8_t> scratch(fits ? 0 : static_cast<size_t>(count) * dtype_size(dtype));
          std::shared_ptr<Buffer> payload = context_->createUnboundBuffer(
              fits ? tensor.data_ptr() : scratch.data(), fits ? tensor.nbytes() : scratch.size());
          payload->recv(sender, payload_slot(id, tag));
          waits->wait(payload, deadline);
        }
        if (!fits) {
          throw Mismatch(detail::concat("rank ", sender, " sent ", count, " ", dtype_name(dtype),
                                        " elements, but this receive expects ", tensor.numel(), " ",
                                        dtype_name(tensor.dtype()), "; the message was dropped"));
        }
      },
      [waits] { waits->abort(); });
  return work;
}

}  // namespace tandem::parallel
