#include "parallel/comm/gloo/gloo_waiters.h"

namespace tandem::parallel {

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

}  // namespace tandem::parallel
