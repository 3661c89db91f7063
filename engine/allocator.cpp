#include "engine/allocator.h"

#include <cstdlib>

#include "engine/error.h"

namespace tandem {

void* CpuAllocator::allocate(size_t nbytes) {
  // aligned_alloc needs a size that is a multiple of the alignment (and not 0).
  const size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  TANDEM_CHECK(ptr != nullptr, "[cpu allocator] out of memory allocating ", nbytes, " bytes");
  const int64_t now =
      allocated_.fetch_add(static_cast<int64_t>(nbytes)) + static_cast<int64_t>(nbytes);
  int64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  count_.fetch_add(1);
  return ptr;
}

void CpuAllocator::deallocate(void* ptr, size_t nbytes) noexcept {
  std::free(ptr);
  allocated_.fetch_sub(static_cast<int64_t>(nbytes));
}

AllocatorStats CpuAllocator::stats() const {
  const int64_t allocated = allocated_.load();
  return {allocated, allocated, peak_.load(), count_.load()};
}

CpuAllocator& cpu_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

}  // namespace tandem
