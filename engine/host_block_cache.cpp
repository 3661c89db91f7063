#include "engine/host_block_cache.h"

#include <algorithm>
#include <bit>
#include <new>

#include "engine/error.h"

namespace tandem {

// The links of a cached block, written into the block itself (Note [Host block cache]).
struct HostBlockCache::FreeBlock {
  FreeBlock* older;       // the order of freeing, across all classes
  FreeBlock* newer;       // also links a list of blocks to give back (evict_for, empty_cache)
  FreeBlock* class_prev;  // the block's size class, most recently freed first
  FreeBlock* class_next;
  size_t size;  // the block (class) size
};

namespace {

// Larger requests cannot be rounded to a class without overflowing; nothing that big can be
// allocated anyway.
constexpr size_t kMaxRequest = size_t{1} << 62;

}  // namespace

HostBlockCache::HostBlockCache(const char* name, HostMemory memory, size_t cache_limit_bytes)
    : name_(name), memory_(memory), cache_limit_(cache_limit_bytes) {}

HostBlockCache::~HostBlockCache() {
  empty_cache();
}

size_t HostBlockCache::round_size(size_t nbytes) {
  if (nbytes <= kPage) return kPage;
  const size_t step = std::max(std::bit_floor(nbytes) / kClassesPerDoubling, kPage);
  return (nbytes + step - 1) / step * step;
}

// Classes are numbered as if every power of two had all eight (steps of an eighth); below 32 KiB,
// where a page is more than an eighth, the classes between pages stay empty.
size_t HostBlockCache::class_index(size_t block_size) {
  const size_t log2 = static_cast<size_t>(std::bit_width(block_size)) - 1;
  const size_t step = (size_t{1} << log2) / kClassesPerDoubling;
  return (log2 - kMinClassLog2) * kClassesPerDoubling + block_size / step - kClassesPerDoubling;
}

void* HostBlockCache::allocate(size_t nbytes) {
  TANDEM_CHECK(nbytes < kMaxRequest, name_, " out of memory allocating ", nbytes, " bytes");
  const size_t size = round_size(nbytes);
  FreeBlock* block = nullptr;
  {
    std::lock_guard lock(mutex_);
    block = class_heads_[class_index(size)];
    if (block != nullptr) {
      unlink(block);
      cached_.fetch_sub(static_cast<int64_t>(size));
    }
  }
  void* ptr = block;
  if (block != nullptr) {
    hits_.fetch_add(1);
  } else {
    misses_.fetch_add(1);
    ptr = new_block(size);
    TANDEM_CHECK(ptr != nullptr, name_, " out of memory allocating ", nbytes, " bytes");
  }
  note_allocated(static_cast<int64_t>(nbytes));
  return ptr;
}

void* HostBlockCache::new_block(size_t size) {
  void* ptr = memory_.allocate(size);
  if (ptr == nullptr) {
    empty_cache();
    ptr = memory_.allocate(size);
  }
  if (ptr != nullptr) reserved_.fetch_add(static_cast<int64_t>(size));
  return ptr;
}

void HostBlockCache::note_allocated(int64_t nbytes) {
  const int64_t now = allocated_.fetch_add(nbytes) + nbytes;
  int64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  count_.fetch_add(1);
}

void HostBlockCache::count_uncached_allocate(size_t nbytes, size_t size) {
  reserved_.fetch_add(static_cast<int64_t>(size));
  note_allocated(static_cast<int64_t>(nbytes));
}

void HostBlockCache::count_uncached_free(size_t nbytes, size_t size) {
  allocated_.fetch_sub(static_cast<int64_t>(nbytes));
  reserved_.fetch_sub(static_cast<int64_t>(size));
}

void HostBlockCache::deallocate(void* ptr, size_t nbytes) noexcept {
  if (ptr == nullptr) return;
  allocated_.fetch_sub(static_cast<int64_t>(nbytes));
  const size_t size = round_size(nbytes);
  auto* block = new (ptr) FreeBlock{nullptr, nullptr, nullptr, nullptr, size};
  if (size > cache_limit_) {
    release(block);
    return;
  }
  FreeBlock* victims = nullptr;
  {
    std::lock_guard lock(mutex_);
    victims = evict_for(size);
    block->older = newest_;
    (newest_ != nullptr ? newest_->newer : oldest_) = block;
    newest_ = block;
    FreeBlock*& head = class_heads_[class_index(size)];
    block->class_next = head;
    if (head != nullptr) head->class_prev = block;
    head = block;
    cached_.fetch_add(static_cast<int64_t>(size));
  }
  release(victims);
}

HostBlockCache::FreeBlock* HostBlockCache::evict_for(size_t incoming) {
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

void HostBlockCache::unlink(FreeBlock* block) {
  (block->older != nullptr ? block->older->newer : oldest_) = block->newer;
  (block->newer != nullptr ? block->newer->older : newest_) = block->older;
  if (block->class_prev != nullptr) {
    block->class_prev->class_next = block->class_next;
  } else {
    class_heads_[class_index(block->size)] = block->class_next;
  }
  if (block->class_next != nullptr) block->class_next->class_prev = block->class_prev;
}

void HostBlockCache::release(FreeBlock* blocks) noexcept {
  while (blocks != nullptr) {
    FreeBlock* next = blocks->newer;
    const size_t size = blocks->size;
    memory_.free(blocks, size);
    reserved_.fetch_sub(static_cast<int64_t>(size));
    released_.fetch_add(1);
    blocks = next;
  }
}

void HostBlockCache::empty_cache() noexcept {
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

CacheStats HostBlockCache::stats() const {
  return {allocated_.load(), reserved_.load(), cached_.load(), peak_.load(),
          count_.load(),     hits_.load(),     misses_.load(), released_.load()};
}

}  // namespace tandem
