#include "engine/device_syncs.h"

#include <atomic>

namespace tandem {
namespace {

std::atomic<int64_t>& syncs() {
  static std::atomic<int64_t> count{0};
  return count;
}

}  // namespace

int64_t device_sync_count() {
  return syncs().load(std::memory_order_relaxed);
}

void detail::count_device_sync() {
  syncs().fetch_add(1, std::memory_order_relaxed);
}

}  // namespace tandem
