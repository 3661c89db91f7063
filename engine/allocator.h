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
/// - larger ones go to a HostBlockCache (Note [Host block cache] in engine/host_block_cache.h,
///   shared with the pinned allocator) whose blocks are mmap'ed: eight size classes per power of
///   two (128, 144, 160, ... 240, 256, 288 KiB, ...), at most 12.5 % waste, every class a
///   multiple of 16 KiB, so of the page size; a freed block is kept for its class, most recently
///   freed reused first;
/// - the free (cached) bytes are capped: cache_limit(), which the process-wide allocator takes
///   from TANDEM_CPU_CACHE_MB, default a quarter of physical memory; over the cap the blocks
///   freed longest ago are unmapped first. A cap of 0 turns caching off: every block then comes
///   from aligned_alloc, as before the cache existed (an mmap per large block would fault far
///   more often than glibc does);
/// - when mmap (or aligned_alloc) fails, the cache is emptied and the call retried once before
///   tandem::Error is thrown.
/// After the first training step the cache holds every size a step needs, so later steps make no
/// mmap or munmap calls (detailed_stats().cache_misses stops growing) and take no page faults in
/// these buffers.

#include <cstddef>
#include <cstdint>

#include "engine/host_block_cache.h"

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

/// The Allocator interface's part of a host allocator's statistics.
inline AllocatorStats allocator_stats(const CacheStats& stats) {
  return {stats.allocated_bytes, stats.reserved_bytes, stats.peak_allocated_bytes,
          stats.allocation_count};
}

/// The host allocator: 64-byte aligned, thread-safe, caching (Note [CPU caching allocator]).
/// Tensors use the process-wide cpu_allocator(); tests make their own.
class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kAlignment = 64;
  /// Requests below this go to aligned_alloc and are not cached.
  static constexpr size_t kSmallLimit = size_t{128} << 10;
  /// Size classes per power of two above kSmallLimit.
  static constexpr size_t kClassesPerDoubling = HostBlockCache::kClassesPerDoubling;

  /// An allocator that keeps at most `cache_limit_bytes` of freed blocks (0: no caching, every
  /// block from aligned_alloc).
  explicit CpuAllocator(size_t cache_limit_bytes);
  /// Unmaps the cached blocks; blocks still handed out are leaked (their memory goes with the
  /// process).
  ~CpuAllocator() override = default;
  CpuAllocator(const CpuAllocator&) = delete;
  CpuAllocator& operator=(const CpuAllocator&) = delete;

  void* allocate(size_t nbytes) override;
  /// `nbytes` must be what allocate() was given for `ptr`.
  void deallocate(void* ptr, size_t nbytes) noexcept override;
  AllocatorStats stats() const override { return allocator_stats(cache_.stats()); }
  CacheStats detailed_stats() const { return cache_.stats(); }

  /// Gives every cached block back to the system (torch.cuda.empty_cache() for host memory).
  void empty_cache() noexcept { cache_.empty_cache(); }
  size_t cache_limit() const { return cache_.cache_limit(); }

  /// The size of the block a request gets with caching on: a multiple of kAlignment below
  /// kSmallLimit (0 gets kAlignment), else its size class.
  static size_t round_size(size_t nbytes);

 private:
  /// Whether a request of `nbytes` goes through the cache (else to aligned_alloc).
  bool cached(size_t nbytes) const { return nbytes >= kSmallLimit && cache_limit() > 0; }

  HostBlockCache cache_;  // the large blocks, and the statistics of all
};

/// The allocator of CPU tensors, capped by TANDEM_CPU_CACHE_MB (MiB of cached free blocks; 0
/// disables caching; default a quarter of physical memory). Created on first use and never
/// destroyed: tensors may be freed during static destruction.
CpuAllocator& cpu_allocator();

}  // namespace tandem
