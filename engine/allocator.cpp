#include "engine/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>

#include "engine/error.h"

namespace tandem {

// The links of a cached block, written into the block itself (Note [CPU caching allocator]).
struct CpuAllocator::FreeBlock {
  FreeBlock* older;       // the order of freeing, across all classes
  FreeBlock* newer;       // also links a list of blocks to unmap (evict_for, empty_cache)
  FreeBlock* class_prev;  // the block's size class, most recently freed first
  FreeBlock* class_next;
  size_t size;  // the block (class) size
};

namespace {

// Larger requests cannot be rounded to a class without overflowing; nothing that big can be
// mapped anyway.
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

void* map_block(size_t size) {
  void* ptr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return ptr == MAP_FAILED ? nullptr : ptr;
}

}  // namespace

CpuAllocator::CpuAllocator(size_t cache_limit_bytes) : cache_limit_(cache_limit_bytes) {}

CpuAllocator::~CpuAllocator() {
  empty_cache();
}

size_t CpuAllocator::round_size(size_t nbytes) {
  if (nbytes < kSmallLimit) return aligned_size(nbytes);
  const size_t step = std::bit_floor(nbytes) / kClassesPerDoubling;
  return (nbytes + step - 1) / step * step;
}

size_t CpuAllocator::class_index(size_t block_size) {
  const size_t log2 = static_cast<size_t>(std::bit_width(block_size)) - 1;
  const size_t step = (size_t{1} << log2) / kClassesPerDoubling;
  return (log2 - kMinClassLog2) * kClassesPerDoubling + block_size / step - kClassesPerDoubling;
}

void* CpuAllocator::allocate(size_t nbytes) {
  TANDEM_CHECK(nbytes < kMaxRequest, "[cpu allocator] out of memory allocating ", nbytes, " bytes");
  if (cached(nbytes)) return allocate_large(nbytes, round_size(nbytes));
  const size_t size = aligned_size(nbytes);
  void* ptr = std::aligned_alloc(kAlignment, size);
  if (ptr == nullptr) {
    empty_cache();
    ptr = std::aligned_alloc(kAlignment, size);
  }
  TANDEM_CHECK(ptr != nullptr, "[cpu allocator] out of memory allocating ", nbytes, " bytes");
  reserved_.fetch_add(static_cast<int64_t>(size));
  note_allocated(static_cast<int64_t>(nbytes));
  return ptr;
}

void* CpuAllocator::allocate_large(size_t nbytes, size_t block_size) {
  FreeBlock* block = nullptr;
  {
    std::lock_guard lock(mutex_);
    block = class_heads_[class_index(block_size)];
    if (block != nullptr) {
      unlink(block);
      cached_.fetch_sub(static_cast<int64_t>(block_size));
    }
  }
  if (block != nullptr) {
    hits_.fetch_add(1);
    note_allocated(static_cast<int64_t>(nbytes));
    return block;
  }
  misses_.fetch_add(1);
  void* ptr = map_block(block_size);
  if (ptr == nullptr) {
    empty_cache();
    ptr = map_block(block_size);
  }
  TANDEM_CHECK(ptr != nullptr, "[cpu allocator] out of memory allocating ", nbytes,
               " bytes (mmap: ", std::strerror(errno), ")");
  reserved_.fetch_add(static_cast<int64_t>(block_size));
  note_allocated(static_cast<int64_t>(nbytes));
  return ptr;
}

void CpuAllocator::note_allocated(int64_t nbytes) {
  const int64_t now = allocated_.fetch_add(nbytes) + nbytes;
  int64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  count_.fetch_add(1);
}

void CpuAllocator::deallocate(void* ptr, size_t nbytes) noexcept {
  if (ptr == nullptr) return;
  allocated_.fetch_sub(static_cast<int64_t>(nbytes));
  if (cached(nbytes)) {
    deallocate_large(ptr, round_size(nbytes));
    return;
  }
  const size_t size = aligned_size(nbytes);
  std::free(ptr);
  reserved_.fetch_sub(static_cast<int64_t>(size));
}

void CpuAllocator::deallocate_large(void* ptr, size_t block_size) noexcept {
  auto* block = new (ptr) FreeBlock{nullptr, nullptr, nullptr, nullptr, block_size};
  if (block_size > cache_limit_) {
    release(block);
    return;
  }
  FreeBlock* victims = nullptr;
  {
    std::lock_guard lock(mutex_);
    victims = evict_for(block_size);
    block->older = newest_;
    (newest_ != nullptr ? newest_->newer : oldest_) = block;
    newest_ = block;
    FreeBlock*& head = class_heads_[class_index(block_size)];
    block->class_next = head;
    if (head != nullptr) head->class_prev = block;
    head = block;
    cached_.fetch_add(static_cast<int64_t>(block_size));
  }
  release(victims);
}

CpuAllocator::FreeBlock* CpuAllocator::evict_for(size_t incoming) {
  FreeBlock* victims = nullptr;
  while (oldest_ != nullptr && static_cast<size_t>(cached_.load()) + incoming > cache_limit_) {
    FreeBlock* block = oldest_;
    unlink(block);
    cached_.fetch_sub(static_cast<int64_t>(block->size));
    block->newer = victims;
    victims = block;
  }
  return victims;
}

void CpuAllocator::unlink(FreeBlock* block) {
  (block->older != nullptr ? block->older->newer : oldest_) = block->newer;
  (block->newer != nullptr ? block->newer->older : newest_) = block->older;
  if (block->class_prev != nullptr) {
    block->class_prev->class_next = block->class_next;
  } else {
    class_heads_[class_index(block->size)] = block->class_next;
  }
  if (block->class_next != nullptr) block->class_next->class_prev = block->class_prev;
}

void CpuAllocator::release(FreeBlock* blocks) noexcept {
  while (blocks != nullptr) {
    FreeBlock* next = blocks->newer;
    const size_t size = blocks->size;
    ::munmap(blocks, size);
    reserved_.fetch_sub(static_cast<int64_t>(size));
    released_.fetch_add(1);
    blocks = next;
  }
}

void CpuAllocator::empty_cache() noexcept {
  FreeBlock* blocks = nullptr;
  {
    std::lock_guard lock(mutex_);
    blocks = oldest_;  // already linked through `newer`
    oldest_ = nullptr;
    newest_ = nullptr;
    for (FreeBlock*& head : class_heads_) head = nullptr;
    cached_.store(0);
  }
  release(blocks);
}

AllocatorStats CpuAllocator::stats() const {
  return {allocated_.load(), reserved_.load(), peak_.load(), count_.load()};
}

CpuAllocatorStats CpuAllocator::detailed_stats() const {
  return {allocated_.load(), reserved_.load(), cached_.load(), peak_.load(),
          count_.load(),     hits_.load(),     misses_.load(), released_.load()};
}

CpuAllocator& cpu_allocator() {
  // Note [Leaked singletons] (engine/cuda/runtime/caching_allocator.cpp): never destroyed, so that
  // a tensor freed during static destruction still finds its allocator.
  static auto* allocator = new CpuAllocator(cache_limit_from_environment());
  return *allocator;
}

}  // namespace tandem
