#pragma once
/// Device memory comes from an Allocator. The CPU one hands out 64-byte aligned blocks (AVX-512 and
/// oneDNN friendly) and caches the large ones (Note [CPU caching allocator]); the CUDA backend
/// implements the same interface with a stream-aware caching allocator.
///
/// Note [CPU caching allocator]: a training step frees and allocates the same activation,
/// gradient and oneDNN reorder buffers (hundreds of KiB to tens of MiB) every step. glibc serves
/// those with mmap and munmap, or from a heap it trims, so the next use page-faults the memory in
/// again (thousands to tens of thousands of minor faults per ResNet-20 step, docs/benchmarks.md).
/// So, like PyTorch's CUDA caching allocator but for host memory:
/// - requests below kSmallLimit (128 KiB, glibc's default mmap threshold) go to aligned_alloc and
///   free: glibc keeps those in its arenas and reuses them without system calls, and they are the
///   most frequent requests, which then take no lock;
/// - larger ones are rounded up to a size class, eight per power of two (128, 144, 160, ... 240,
///   256, 288 KiB, ...): at most 12.5 % waste, and every class is a multiple of 16 KiB, so of the
///   page size. A block is mmap'ed at its class size and, when freed, kept on its class's free
///   list. A request reuses only a block of its own class: blocks are never split, so a bigger one
///   would carry its excess for as long as it lives. The most recently freed block of the class
///   goes first: its pages are the likeliest to be in cache and TLB;
/// - the free (cached) bytes are capped: cache_limit(), which the process-wide allocator takes
///   from TANDEM_CPU_CACHE_MB, default a quarter of physical memory. A free that would go over
///   the cap first unmaps the blocks freed longest ago: a step asks again for what the previous
///   step freed, while the oldest blocks are sizes that stopped coming (an epoch's smaller last
///   batch, an evaluation pass). A block bigger than the cap is unmapped at once. A cap of 0
///   turns caching off: every block then comes from aligned_alloc, as before the cache existed
///   (an mmap per large block would fault far more often than glibc does);
/// - the free lists are intrusive (their links live in the free blocks), so deallocate() never
///   allocates; one mutex guards them, held only while a list changes: mmap and munmap run
///   outside it;
/// - when mmap (or aligned_alloc) fails, the cache is emptied and the call retried once before
///   tandem::Error is thrown.
/// After the first training step the cache holds every size a step needs, so later steps make no
/// mmap or munmap calls (detailed_stats().cache_misses stops growing) and take no page faults in
/// these buffers.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace tandem {

struct AllocatorStats {
  int64_t allocated_bytes = 0;  ///< bytes currently handed out to tensors
  int64_t reserved_bytes = 0;   ///< bytes held from the system (>= allocated with caching)
  int64_t peak_allocated_bytes = 0;
  int64_t allocation_count = 0;  ///< allocate() calls so far
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Returns a block of at least nbytes (nbytes may be 0). Throws tandem::Error when out of memory.
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) noexcept = 0;
  virtual AllocatorStats stats() const = 0;
};

/// CpuAllocator's statistics, with the cache's counters.
struct CpuAllocatorStats {
  int64_t allocated_bytes = 0;       ///< bytes requested by live allocations
  int64_t reserved_bytes = 0;        ///< bytes held from the system: live blocks and cached ones
  int64_t cached_bytes = 0;          ///< bytes in free blocks kept for reuse
  int64_t peak_allocated_bytes = 0;  ///< since construction
  int64_t allocation_count = 0;      ///< allocate() calls so far, small and large
  int64_t cache_hits = 0;            ///< large allocations served by a cached block
  int64_t cache_misses = 0;          ///< large allocations that needed a new block (mmap)
  int64_t released_blocks = 0;       ///< blocks unmapped: evicted, over the cap, empty_cache()
};

/// The host allocator: 64-byte aligned, thread-safe, caching (Note [CPU caching allocator]).
/// Tensors use the process-wide cpu_allocator(); tests make their own.
class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kAlignment = 64;
  /// Requests below this go to aligned_alloc and are not cached.
  static constexpr size_t kSmallLimit = size_t{128} << 10;
  /// Size classes per power of two above kSmallLimit.
  static constexpr size_t kClassesPerDoubling = 8;

  /// An allocator that keeps at most `cache_limit_bytes` of freed blocks (0: no caching, every
  /// block from aligned_alloc).
  explicit CpuAllocator(size_t cache_limit_bytes);
  /// Unmaps the cached blocks; blocks still handed out are leaked (their memory goes with the
  /// process).
  ~CpuAllocator() override;
  CpuAllocator(const CpuAllocator&) = delete;
  CpuAllocator& operator=(const CpuAllocator&) = delete;

  void* allocate(size_t nbytes) override;
  /// `nbytes` must be what allocate() was given for `ptr`.
  void deallocate(void* ptr, size_t nbytes) noexcept override;
  AllocatorStats stats() const override;
  CpuAllocatorStats detailed_stats() const;

  /// Gives every cached block back to the system (torch.cuda.empty_cache() for host memory).
  void empty_cache() noexcept;
  size_t cache_limit() const { return cache_limit_; }

  /// The size of the block a request gets with caching on: a multiple of kAlignment below
  /// kSmallLimit (0 gets kAlignment), else its size class.
  static size_t round_size(size_t nbytes);

 private:
  struct FreeBlock;
  static constexpr size_t kMinClassLog2 = 17;  // log2(kSmallLimit)
  static constexpr size_t kClassCount = (64 - kMinClassLog2) * kClassesPerDoubling;

  static size_t class_index(size_t block_size);
  /// Whether a request of `nbytes` goes through the cache (else to aligned_alloc).
  bool cached(size_t nbytes) const { return nbytes >= kSmallLimit && cache_limit_ > 0; }
  void* allocate_large(size_t nbytes, size_t block_size);
  void deallocate_large(void* ptr, size_t block_size) noexcept;
  /// Unlinks cached blocks, oldest first, until `incoming` more bytes fit under the cap; returns
  /// them as a list to unmap outside the lock. Needs mutex_.
  FreeBlock* evict_for(size_t incoming);
  void unlink(FreeBlock* block);
  /// Unmaps a list made by evict_for() or empty_cache(); does not lock.
  void release(FreeBlock* blocks) noexcept;
  void note_allocated(int64_t nbytes);

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

/// The allocator of CPU tensors, capped by TANDEM_CPU_CACHE_MB (MiB of cached free blocks; 0
/// disables caching; default a quarter of physical memory). Created on first use and never
/// destroyed: tensors may be freed during static destruction.
CpuAllocator& cpu_allocator();

}  // namespace tandem
