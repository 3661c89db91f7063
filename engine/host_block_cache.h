#pragma once
/// A cache of host memory blocks by size class, behind the CPU allocator (engine/allocator.h)
/// and the pinned one (engine/cuda/runtime/pinned_allocator.h): one policy for host memory, like
/// PyTorch's at::CachingHostAllocatorImpl. The allocators differ only in where the memory comes
/// from (mmap, cudaHostAlloc), given as a HostMemory, and in what they do before a block may be
/// cached (the pinned one waits for the copies that use it).
///
/// Note [Host block cache]:
/// - a request is rounded up to a size class, eight per power of two (128, 144, 160, ... 240,
///   256, 288 KiB, ...), and to whole pages (4 KiB: below 32 KiB the classes are 4, 8, 12, ...
///   32 KiB): above 32 KiB at most 12.5 % waste, below it less than a page. A block is made at
///   its class size and, when freed, kept on its class's free list. A request reuses only a block
///   of its own class: blocks are never split, so a bigger one would carry its excess for as long
///   as it lives. The most recently freed block of the class goes first: its pages are the
///   likeliest to be in cache and TLB;
/// - the free (cached) bytes are capped (cache_limit()). A free that would go over the cap first
///   gives back the blocks freed longest ago: a training step asks again for what the previous
///   step freed, while the oldest blocks are sizes that stopped coming (an epoch's smaller last
///   batch, an evaluation pass). A block bigger than the cap is given back at once;
/// - the free lists are intrusive (their links live in the free blocks), so a free never
///   allocates; one mutex guards them, held only while a list changes: HostMemory's calls run
///   outside it;
/// - when HostMemory has no memory for a new block, the cache is emptied and the call retried
///   once before tandem::Error is thrown.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace tandem {

/// Where a HostBlockCache's blocks come from and go back to.
struct HostMemory {
  /// A new block of `size` bytes (a size class), or nullptr when the system has no memory for it.
  /// May throw tandem::Error for any other failure.
  void* (*allocate)(size_t size);
  /// Gives back a block made by `allocate`.
  void (*free)(void* ptr, size_t size) noexcept;
};

/// The statistics of a host allocator and its cache.
struct CacheStats {
  int64_t allocated_bytes = 0;       ///< bytes requested by live allocations
  int64_t reserved_bytes = 0;        ///< bytes held from the system: live blocks and cached ones
  int64_t cached_bytes = 0;          ///< bytes in free blocks kept for reuse
  int64_t peak_allocated_bytes = 0;  ///< since construction
  int64_t allocation_count = 0;      ///< allocations so far, cached or not
  int64_t cache_hits = 0;            ///< allocations served by a cached block
  int64_t cache_misses = 0;          ///< allocations that needed a new block
  int64_t released_blocks = 0;       ///< blocks given back: evicted, over the cap, empty_cache()
};

/// Size-class cache of host blocks (Note [Host block cache]). Thread-safe.
class HostBlockCache {
 public:
  /// Size classes per power of two.
  static constexpr size_t kClassesPerDoubling = 8;
  /// Every block is a whole number of these.
  static constexpr size_t kPage = 4096;

  /// `name` starts error messages ("[cpu allocator]"); at most `cache_limit_bytes` of freed blocks
  /// are kept.
  HostBlockCache(const char* name, HostMemory memory, size_t cache_limit_bytes);
  /// Gives back the cached blocks; blocks still handed out are the owner's.
  ~HostBlockCache();
  HostBlockCache(const HostBlockCache&) = delete;
  HostBlockCache& operator=(const HostBlockCache&) = delete;

  /// A block of round_size(nbytes) bytes: a cached one of its class, else a new one. Throws
  /// tandem::Error when out of memory.
  void* allocate(size_t nbytes);
  /// Caches a block from allocate(nbytes) (`nbytes` as given there), or gives it back.
  void deallocate(void* ptr, size_t nbytes) noexcept;
  /// Gives every cached block back to the system.
  void empty_cache() noexcept;

  /// Count, in stats(), an allocation that the owner serves without the cache (the CPU
  /// allocator's small blocks), and its free: `nbytes` asked for, `size` held from the system.
  void count_uncached_allocate(size_t nbytes, size_t size);
  void count_uncached_free(size_t nbytes, size_t size);

  CacheStats stats() const;
  size_t cache_limit() const { return cache_limit_; }

  /// The size of the block a request of `nbytes` gets: its size class, at least a page.
  static size_t round_size(size_t nbytes);

 private:
  struct FreeBlock;
  static constexpr size_t kMinClassLog2 = 12;  // log2(kPage)
  static constexpr size_t kClassCount = (64 - kMinClassLog2) * kClassesPerDoubling;

  static size_t class_index(size_t block_size);
  void* new_block(size_t size);
  void note_allocated(int64_t nbytes);
  /// Unlinks cached blocks, oldest first, until `incoming` more bytes fit under the cap; returns
  /// them as a list to give back outside the lock. Needs mutex_.
  FreeBlock* evict_for(size_t incoming);
  void unlink(FreeBlock* block);
  /// Gives back a list made by evict_for() or empty_cache(); does not lock.
  void release(FreeBlock* blocks) noexcept;

  const char* const name_;
  const HostMemory memory_;
  const size_t cache_limit_;

  std::mutex mutex_;  // guards the lists and cached_ writes below
  // Per size class, the free blocks, most recently freed first.
  FreeBlock* class_heads_[kClassCount] = {};
  // Every free block, oldest first (evicted from the front, appended at the back).
  FreeBlock* oldest_ = nullptr;
  FreeBlock* newest_ = nullptr;

  std::atomic<int64_t> allocated_{0};
  std::atomic<int64_t> reserved_{0};
  std::atomic<int64_t> cached_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> count_{0};
  std::atomic<int64_t> hits_{0};
  std::atomic<int64_t> misses_{0};
  std::atomic<int64_t> released_{0};
};

}  // namespace tandem
