// The Gloo group's isend/irecv (Note [Gloo point-to-point] in gloo_process_group.h).
#include "parallel/comm/gloo_point_to_point.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include "engine/error.h"
#include "parallel/comm/gloo_process_group.h"

namespace tandem::parallel {

// --- GlooWaiters

GlooWaiters::~GlooWaiters() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (auto& [id, abort] : aborts_) abort();
  }
  wake_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void GlooWaiters::submit(std::function<void()> wait, std::function<void()> abort) {
  std::lock_guard lock(mutex_);
  const uint64_t id = next_id_++;
  aborts_.emplace(id, std::move(abort));
  waits_.emplace_back(id, std::move(wait));
  if (waits_.size() > idle_) {
    threads_.emplace_back([this] { loop(); });
  } else {
    wake_.notify_one();
  }
}

void GlooWaiters::loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    ++idle_;
    wake_.wait(lock, [&] { return stopping_ || !waits_.empty(); });
    --idle_;
    if (waits_.empty()) return;  // stopping, and every wait has run
    auto [id, wait] = std::move(waits_.front());
    waits_.pop_front();
    lock.unlock();
    wait();  // never throws: it completes its Work instead
    lock.lock();
    aborts_.erase(id);
  }
}

// --- isend / irecv

namespace {

using Buffer = gloo::transport::UnboundBuffer;

// Completes `work` with the outcome of one wait (`waited` returns false when aborted, throws on
// a failure or timeout); a failure breaks the group (`broken`), as a collective's does.
void finish(Work& work, const std::function<bool()>& waited,
            const std::function<void(const std::string&)>& broken) {
  try {
    if (waited()) return work.mark_completed();
    work.mark_completed(std::make_exception_ptr(
        Error(work.description() + " did not complete: the group was destroyed first")));
  } catch (const std::exception& e) {
    broken(message_of(e));
    work.mark_completed(
        std::make_exception_ptr(Error(work.description() + " failed: " + message_of(e))));
  }
}

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

std::shared_ptr<Work> GlooProcessGroup::run_send(Tensor tensor, int dst, int tag) {
  auto work =
      make_work("isend", " (to rank " + std::to_string(dst) + ", tag " + std::to_string(tag) + ")");
  std::shared_ptr<Buffer> buffer =
      context_->createUnboundBuffer(tensor.data_ptr(), tensor.nbytes());
  if (!post(*work, [&] { buffer->send(dst, static_cast<uint64_t>(tag)); })) return work;
  const auto timeout = options().timeout;
  waiters_->submit(
      [this, work, buffer, tensor, timeout] {
        finish(
            *work, [&] { return buffer->waitSend(nullptr, timeout); },
            [this](const std::string& failure) { set_broken(failure); });
      },
      [buffer] { buffer->abortWaitSend(); });
  return work;
}

std::shared_ptr<Work> GlooProcessGroup::run_recv(Tensor tensor, int src, int tag) {
  auto work = make_work(
      "irecv", src == kAnySource
                   ? " (from any rank, tag " + std::to_string(tag) + ")"
                   : " (from rank " + std::to_string(src) + ", tag " + std::to_string(tag) + ")");
  std::shared_ptr<Buffer> buffer =
      context_->createUnboundBuffer(tensor.data_ptr(), tensor.nbytes());
  std::vector<int> sources;  // Gloo's receive from any of a list of ranks
  for (int r = 0; r < size(); ++r) {
    if (r == src || (src == kAnySource && r != rank())) sources.push_back(r);
  }
  const bool posted = post(*work, [&] {
    if (sources.size() == 1) return buffer->recv(sources[0], static_cast<uint64_t>(tag));
    buffer->recv(sources, static_cast<uint64_t>(tag));
  });
  if (!posted) return work;
  const auto timeout = options().timeout;
  waiters_->submit(
      [this, work, buffer, tensor, timeout] {
        finish(
            *work,
            [&] {
              int source = -1;
              const bool done = buffer->waitRecv(&source, timeout);
              work->set_source_rank(source);
              return done;
            },
            [this](const std::string& failure) { set_broken(failure); });
      },
      [buffer] { buffer->abortWaitRecv(); });
  return work;
}

}  // namespace tandem::parallel
