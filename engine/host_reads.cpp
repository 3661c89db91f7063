#include "engine/host_reads.h"

#include <atomic>

namespace tandem {
namespace {

std::atomic<int64_t>& reads() {
  static std::atomic<int64_t> count{0};
  return count;
}

}  // namespace

int64_t host_read_count() {
  return reads().load(std::memory_order_relaxed);
}

void detail::count_host_read() {
  reads().fetch_add(1, std::memory_order_relaxed);
}

}  // namespace tandem
