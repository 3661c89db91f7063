// CpuAllocator: alignment, size classes, reuse, statistics, the cache cap, empty_cache,
// out-of-memory and concurrent use (Note [CPU caching allocator]).

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "engine/allocator.h"
#include "engine/tandem.h"
#include "tests/support/error_message.h"

namespace tandem {
namespace {

using testing::error_message;

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGiB = size_t{1} << 30;

bool aligned(const void* ptr) {
  return reinterpret_cast<uintptr_t>(ptr) % CpuAllocator::kAlignment == 0;
}

TEST(CpuAllocator, BlocksAreAlignedAndWritable) {
  CpuAllocator allocator(kGiB);
  for (const size_t nbytes : {size_t{1}, size_t{63}, size_t{64}, size_t{1000}, 100 * kKiB,
                              128 * kKiB - 1, 128 * kKiB, kMiB + 1, 5 * kMiB + 3}) {
    void* ptr = allocator.allocate(nbytes);
    EXPECT_TRUE(aligned(ptr)) << nbytes << " bytes at " << ptr;
    std::memset(ptr, 0xab, nbytes);
    EXPECT_EQ(static_cast<unsigned char*>(ptr)[nbytes - 1], 0xab);
    allocator.deallocate(ptr, nbytes);
  }
  EXPECT_EQ(allocator.stats().allocated_bytes, 0);
}

TEST(CpuAllocator, ZeroBytesGetADistinctAlignedBlock) {
  CpuAllocator allocator(kGiB);
  void* a = allocator.allocate(0);
  void* b = allocator.allocate(0);
  ASSERT_NE(a, nullptr);
  EXPECT_NE(a, b);
  EXPECT_TRUE(aligned(a));
  EXPECT_EQ(allocator.stats().allocated_bytes, 0);
  EXPECT_EQ(allocator.stats().allocation_count, 2);
  allocator.deallocate(a, 0);
  allocator.deallocate(b, 0);
  EXPECT_EQ(allocator.stats().reserved_bytes, 0);
}

TEST(CpuAllocator, SizeClassesWasteAtMostAnEighth) {
  EXPECT_EQ(CpuAllocator::round_size(0), CpuAllocator::kAlignment);
  EXPECT_EQ(CpuAllocator::round_size(65), 128u);
  EXPECT_EQ(CpuAllocator::round_size(128 * kKiB), 128 * kKiB);
  EXPECT_EQ(CpuAllocator::round_size(128 * kKiB + 1), 144 * kKiB);
  EXPECT_EQ(CpuAllocator::round_size(kMiB), kMiB);
  EXPECT_EQ(CpuAllocator::round_size(kMiB + 1), kMiB + 128 * kKiB);
  for (size_t nbytes = CpuAllocator::kSmallLimit; nbytes < 64 * kMiB;
       nbytes = nbytes * 9 / 8 + 4097) {
    const size_t size = CpuAllocator::round_size(nbytes);
    EXPECT_GE(size, nbytes);
    EXPECT_LE(size - nbytes, nbytes / 8) << nbytes;
    EXPECT_EQ(size % (16 * kKiB), 0u) << nbytes;  // page multiples: mmap wastes nothing more
  }
}

TEST(CpuAllocator, ReusesAFreedBlockOfTheSameClass) {
  CpuAllocator allocator(kGiB);
  void* first = allocator.allocate(kMiB);
  allocator.deallocate(first, kMiB);
  EXPECT_EQ(allocator.detailed_stats().cache_misses, 1);
  EXPECT_EQ(allocator.detailed_stats().cache_hits, 0);

  void* second = allocator.allocate(kMiB);
  EXPECT_EQ(second, first);
  EXPECT_EQ(allocator.detailed_stats().cache_hits, 1);
  EXPECT_EQ(allocator.detailed_stats().cache_misses, 1);
  allocator.deallocate(second, kMiB);

  // A request of the same class (1 MiB - 100 rounds to 1 MiB) reuses it too; another class does
  // not.
  void* same_class = allocator.allocate(kMiB - 100);
  EXPECT_EQ(same_class, first);
  void* other_class = allocator.allocate(2 * kMiB);
  EXPECT_NE(other_class, first);
  EXPECT_EQ(allocator.detailed_stats().cache_hits, 2);
  EXPECT_EQ(allocator.detailed_stats().cache_misses, 2);
  allocator.deallocate(same_class, kMiB - 100);
  allocator.deallocate(other_class, 2 * kMiB);
}

TEST(CpuAllocator, CountsAllocatedReservedAndCachedBytes) {
  CpuAllocator allocator(kGiB);
  void* large = allocator.allocate(kMiB + 1);  // class: 1 MiB + 128 KiB
  void* small = allocator.allocate(100);       // 128 bytes from malloc
  CacheStats stats = allocator.detailed_stats();
  EXPECT_EQ(stats.allocated_bytes, static_cast<int64_t>(kMiB + 1 + 100));
  EXPECT_EQ(stats.reserved_bytes, static_cast<int64_t>(kMiB + 128 * kKiB + 128));
  EXPECT_EQ(stats.cached_bytes, 0);
  EXPECT_EQ(stats.allocation_count, 2);

  allocator.deallocate(large, kMiB + 1);
  stats = allocator.detailed_stats();
  EXPECT_EQ(stats.allocated_bytes, 100);
  EXPECT_EQ(stats.peak_allocated_bytes, static_cast<int64_t>(kMiB + 1 + 100));
  EXPECT_EQ(stats.cached_bytes, static_cast<int64_t>(kMiB + 128 * kKiB));
  EXPECT_EQ(stats.reserved_bytes, static_cast<int64_t>(kMiB + 128 * kKiB + 128));
  EXPECT_EQ(allocator.stats().reserved_bytes, stats.reserved_bytes);

  allocator.deallocate(small, 100);  // small blocks go straight back to malloc
  EXPECT_EQ(allocator.detailed_stats().reserved_bytes, static_cast<int64_t>(kMiB + 128 * kKiB));
  EXPECT_EQ(allocator.detailed_stats().released_blocks, 0);
}

TEST(CpuAllocator, EmptyCacheDropsReservedToAllocated) {
  CpuAllocator allocator(kGiB);
  void* live = allocator.allocate(kMiB);
  void* a = allocator.allocate(2 * kMiB);
  void* b = allocator.allocate(4 * kMiB);
  allocator.deallocate(a, 2 * kMiB);
  allocator.deallocate(b, 4 * kMiB);
  EXPECT_EQ(allocator.stats().reserved_bytes, static_cast<int64_t>(7 * kMiB));

  allocator.empty_cache();
  const CacheStats stats = allocator.detailed_stats();
  EXPECT_EQ(stats.reserved_bytes, stats.allocated_bytes);
  EXPECT_EQ(stats.reserved_bytes, static_cast<int64_t>(kMiB));
  EXPECT_EQ(stats.cached_bytes, 0);
  EXPECT_EQ(stats.released_blocks, 2);

  // The emptied classes miss again; the live block is untouched.
  static_cast<char*>(live)[kMiB - 1] = 1;
  void* again = allocator.allocate(2 * kMiB);
  EXPECT_EQ(allocator.detailed_stats().cache_misses, 4);
  allocator.deallocate(again, 2 * kMiB);
  allocator.deallocate(live, kMiB);
}

TEST(CpuAllocator, CapEvictsTheOldestBlocksFirst) {
  CpuAllocator allocator(3 * kMiB);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(allocator.allocate(kMiB));
  for (void* block : blocks) allocator.deallocate(block, kMiB);  // blocks[0] freed first

  CacheStats stats = allocator.detailed_stats();
  EXPECT_EQ(stats.cached_bytes, static_cast<int64_t>(3 * kMiB));
  EXPECT_EQ(stats.reserved_bytes, static_cast<int64_t>(3 * kMiB));
  EXPECT_EQ(stats.released_blocks, 1);

  // The three cached blocks come back newest first; the oldest was unmapped, so the fourth misses.
  EXPECT_EQ(allocator.allocate(kMiB), blocks[3]);
  EXPECT_EQ(allocator.allocate(kMiB), blocks[2]);
  EXPECT_EQ(allocator.allocate(kMiB), blocks[1]);
  void* fresh = allocator.allocate(kMiB);
  stats = allocator.detailed_stats();
  EXPECT_EQ(stats.cache_hits, 3);
  EXPECT_EQ(stats.cache_misses, 5);
  for (void* block : {blocks[3], blocks[2], blocks[1], fresh}) allocator.deallocate(block, kMiB);
  EXPECT_LE(allocator.detailed_stats().cached_bytes, static_cast<int64_t>(3 * kMiB));

  // A block bigger than the cap is never cached, and evicts nothing.
  const int64_t released = allocator.detailed_stats().released_blocks;
  void* big = allocator.allocate(4 * kMiB);
  allocator.deallocate(big, 4 * kMiB);
  stats = allocator.detailed_stats();
  EXPECT_EQ(stats.released_blocks, released + 1);
  EXPECT_EQ(stats.cached_bytes, static_cast<int64_t>(3 * kMiB));
  EXPECT_EQ(stats.reserved_bytes, static_cast<int64_t>(3 * kMiB));
}

// Without a cache every block comes from aligned_alloc, large ones too: nothing is mapped,
// cached or counted as a hit or miss.
TEST(CpuAllocator, ZeroCapDisablesCaching) {
  CpuAllocator allocator(0);
  for (int i = 0; i < 3; ++i) {
    void* ptr = allocator.allocate(kMiB + 1);
    EXPECT_TRUE(aligned(ptr));
    static_cast<char*>(ptr)[kMiB] = 1;
    EXPECT_EQ(allocator.detailed_stats().reserved_bytes, static_cast<int64_t>(kMiB + 64));
    allocator.deallocate(ptr, kMiB + 1);
  }
  const CacheStats stats = allocator.detailed_stats();
  EXPECT_EQ(stats.cache_hits, 0);
  EXPECT_EQ(stats.cache_misses, 0);
  EXPECT_EQ(stats.released_blocks, 0);
  EXPECT_EQ(stats.cached_bytes, 0);
  EXPECT_EQ(stats.reserved_bytes, 0);
  EXPECT_EQ(stats.allocation_count, 3);
}

TEST(CpuAllocator, OutOfMemoryEmptiesTheCacheAndThrows) {
  CpuAllocator allocator(kGiB);
  allocator.deallocate(allocator.allocate(kMiB), kMiB);
  ASSERT_EQ(allocator.detailed_stats().cached_bytes, static_cast<int64_t>(kMiB));

  // 2^60 bytes is more address space than x86-64 or AArch64 has: mmap fails.
  const std::string message = error_message([&] { allocator.allocate(size_t{1} << 60); });
  EXPECT_NE(message.find("[cpu allocator] out of memory allocating 1152921504606846976 bytes"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  const CacheStats stats = allocator.detailed_stats();
  EXPECT_EQ(stats.cached_bytes, 0) << "the cache is emptied before the retry";
  EXPECT_EQ(stats.reserved_bytes, 0);
  EXPECT_EQ(stats.allocated_bytes, 0);

  EXPECT_NE(error_message([&] { allocator.allocate(SIZE_MAX); }).find("out of memory"),
            std::string::npos);
}

// Four threads allocate, fill, check and free blocks of shared sizes, mostly reused from the
// cache, with a cap small enough that frees also evict: no block is handed out twice, every value
// reads back, and afterwards the lists still hold every cached block. Blocks are written every
// KiB (and at the end), so rounds are short and the threads meet often in the allocator's lists;
// without the mutex this crashes or fails on most runs.
TEST(CpuAllocator, ConcurrentUseKeepsBlocksApart) {
  CpuAllocator allocator(2 * kMiB);
  constexpr int kThreads = 4;
  constexpr int kRounds = 18000;   // a multiple of std::size(sizes)
  constexpr size_t kStride = 256;  // uint32 words
  const size_t sizes[] = {100, 130 * kKiB, 200 * kKiB, 256 * kKiB, 300 * kKiB, kMiB};
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        std::pair<uint32_t*, size_t> held[3];
        for (int k = 0; k < 3; ++k) {
          const size_t nbytes = sizes[(round + k + t) % std::size(sizes)];
          auto* data = static_cast<uint32_t*>(allocator.allocate(nbytes));
          const uint32_t tag = static_cast<uint32_t>(t << 28 | round << 2 | k);
          const size_t words = nbytes / sizeof(uint32_t);
          for (size_t i = 0; i < words; i += kStride) data[i] = tag;
          data[words - 1] = tag;
          held[k] = {data, nbytes};
        }
        for (int k = 0; k < 3; ++k) {
          const auto [data, nbytes] = held[k];
          const uint32_t tag = static_cast<uint32_t>(t << 28 | round << 2 | k);
          const size_t words = nbytes / sizeof(uint32_t);
          for (size_t i = 0; i < words; i += kStride) failures[t] += data[i] != tag;
          failures[t] += data[words - 1] != tag;
          allocator.deallocate(data, nbytes);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  const CacheStats stats = allocator.detailed_stats();
  EXPECT_EQ(stats.allocated_bytes, 0);
  EXPECT_EQ(stats.reserved_bytes, stats.cached_bytes);
  EXPECT_LE(stats.cached_bytes, static_cast<int64_t>(2 * kMiB));
  EXPECT_GT(stats.cache_hits, 0);
  EXPECT_EQ(stats.cache_hits + stats.cache_misses, kThreads * kRounds * 5 / 2);  // 1 in 6 small
  EXPECT_EQ(stats.allocation_count, kThreads * kRounds * 3);
  allocator.empty_cache();  // walks the lists: a block lost from them stays reserved
  EXPECT_EQ(allocator.detailed_stats().reserved_bytes, 0);
}

// CPU tensors come from the process-wide allocator and reuse its blocks.
TEST(CpuAllocator, TensorsReuseCachedBlocks) {
  CpuAllocator& allocator = cpu_allocator();
  if (allocator.cache_limit() < 4 * kMiB) GTEST_SKIP() << "TANDEM_CPU_CACHE_MB turns caching off";
  const void* first = nullptr;
  {
    const Tensor t = empty({static_cast<int64_t>(kMiB / sizeof(float))});
    first = t.data_ptr();
  }
  const int64_t hits = allocator.detailed_stats().cache_hits;
  const Tensor t = empty({static_cast<int64_t>(kMiB / sizeof(float))});
  EXPECT_EQ(t.data_ptr(), first);
  EXPECT_EQ(allocator.detailed_stats().cache_hits, hits + 1);
}

}  // namespace
}  // namespace tandem
