#include "engine/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <string_view>

#include "engine/error.h"

namespace tandem {
namespace {

// Larger requests cannot be rounded up without overflowing; nothing that big can be allocated
// anyway.
constexpr size_t kMaxRequest = size_t{1} << 62;

// Number of bytes this machine has, or 0 when it cannot say.
size_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<size_t>(pages) * static_cast<size_t>(page_size);
}

// TANDEM_CPU_CACHE_MB in bytes, or a quarter of physical memory (4 GiB if unknown).
size_t cache_limit_from_environment() {
  const char* text = std::getenv("TANDEM_CPU_CACHE_MB");
  if (text == nullptr || *text == '\0') {
    const size_t physical = physical_memory_bytes();
    return physical > 0 ? physical / 4 : size_t{4} << 30;
  }
  const std::string_view value(text);
  uint64_t mib = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), mib);
  const bool whole_mib =
      error == std::errc() && end == value.data() + value.size() && mib <= (kMaxRequest >> 20);
  TANDEM_CHECK(whole_mib,
               "[cpu allocator] TANDEM_CPU_CACHE_MB must be a whole number of MiB (0 disables "
               "caching), got '",
               value, "'");
  return static_cast<size_t>(mib) << 20;
}

// aligned_alloc needs a size that is a multiple of the alignment (and not 0).
size_t aligned_size(size_t nbytes) {
  constexpr size_t kAlignment = CpuAllocator::kAlignment;
  return nbytes == 0 ? kAlignment : (nbytes + kAlignment - 1) / kAlignment * kAlignment;
}

// The large blocks' memory: mmap'ed, so that a block given back leaves the process at once.
void* map_block(size_t size) {
  void* ptr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return ptr == MAP_FAILED ? nullptr : ptr;
}

void unmap_block(void* ptr, size_t size) noexcept {
  ::munmap(ptr, size);
}

}  // namespace

CpuAllocator::CpuAllocator(size_t cache_limit_bytes)
    : cache_("[cpu allocator]", HostMemory{map_block, unmap_block}, cache_limit_bytes) {}

size_t CpuAllocator::round_size(size_t nbytes) {
  return nbytes < kSmallLimit ? aligned_size(nbytes) : HostBlockCache::round_size(nbytes);
}

void* CpuAllocator::allocate(size_t nbytes) {
  if (cached(nbytes)) return cache_.allocate(nbytes);
  TANDEM_CHECK(nbytes < kMaxRequest, "[cpu allocator] out of memory allocating ", nbytes, " bytes");
  const size_t size = aligned_size(nbytes);
  void* ptr = std::aligned_alloc(kAlignment, size);
  if (ptr == nullptr) {
    cache_.empty_cache();
    ptr = std::aligned_alloc(kAlignment, size);
  }
  TANDEM_CHECK(ptr != nullptr, "[cpu allocator] out of memory allocating ", nbytes, " bytes");
  cache_.count_uncached_allocate(nbytes, size);
  return ptr;
}

void CpuAllocator::deallocate(void* ptr, size_t nbytes) noexcept {
  if (ptr == nullptr) return;
  if (cached(nbytes)) {
    cache_.deallocate(ptr, nbytes);
    return;
  }
  std::free(ptr);
  cache_.count_uncached_free(nbytes, aligned_size(nbytes));
}

CpuAllocator& cpu_allocator() {
  // Note [Leaked singletons] (engine/cuda/runtime/caching_allocator.cpp): never destroyed, so that
  // a tensor freed during static destruction still finds its allocator.
  static auto* allocator = new CpuAllocator(cache_limit_from_environment());
  return *allocator;
}

}  // namespace tandem
