// HostBlockCache on a counting HostMemory: the size classes (page multiples, at most an eighth
// of waste above 32 KiB), reuse by class, uncached counts, and out-of-memory (Note [Host block
// cache]). The CPU allocator's tests (allocator_test.cpp) cover the cap, eviction and threads.

#include "engine/host_block_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/support/error_message.h"

namespace tandem {
namespace {

using testing::error_message;

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;

// A HostMemory over aligned_alloc that counts its blocks and can be told to have no memory.
int live_blocks = 0;
int failures_left = 0;

void* counting_allocate(size_t size) {
  if (failures_left > 0) {
    --failures_left;
    return nullptr;
  }
  ++live_blocks;
  return std::aligned_alloc(HostBlockCache::kPage, size);
}

void counting_free(void* ptr, size_t /*size*/) noexcept {
  --live_blocks;
  std::free(ptr);
}

class HostBlockCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    live_blocks = 0;
    failures_left = 0;
  }
  void TearDown() override { EXPECT_EQ(live_blocks, 0) << "blocks not given back"; }

  static constexpr HostMemory kMemory{counting_allocate, counting_free};
};

TEST_F(HostBlockCacheTest, ClassesArePagesBelow32KiBAndEighthsAbove) {
  EXPECT_EQ(HostBlockCache::round_size(0), 4 * kKiB);
  EXPECT_EQ(HostBlockCache::round_size(1000), 4 * kKiB);
  EXPECT_EQ(HostBlockCache::round_size(4 * kKiB + 1), 8 * kKiB);
  EXPECT_EQ(HostBlockCache::round_size(20 * kKiB + 1), 24 * kKiB);
  EXPECT_EQ(HostBlockCache::round_size(32 * kKiB + 1), 36 * kKiB);
  EXPECT_EQ(HostBlockCache::round_size(128 * kKiB + 1), 144 * kKiB);
  EXPECT_EQ(HostBlockCache::round_size(kMiB + 1), kMiB + 128 * kKiB);
  for (size_t nbytes = 1; nbytes < 256 * kMiB; nbytes = nbytes * 9 / 8 + 1001) {
    const size_t size = HostBlockCache::round_size(nbytes);
    EXPECT_GE(size, nbytes);
    EXPECT_EQ(size % HostBlockCache::kPage, 0u) << nbytes;
    EXPECT_LE(size - nbytes, nbytes <= 32 * kKiB ? HostBlockCache::kPage - 1 : nbytes / 8)
        << nbytes;
  }
}

// Every class has its own list: a block goes back only to requests of its class, whichever
// sizes the classes have (below 32 KiB the page classes skip list slots).
TEST_F(HostBlockCacheTest, ABlockIsReusedOnlyByItsClass) {
  HostBlockCache cache("[test]", kMemory, 64 * kMiB);
  for (const size_t nbytes :
       {size_t{100}, 5 * kKiB, 12 * kKiB, 31 * kKiB, 33 * kKiB, 300 * kKiB, 3 * kMiB + 7}) {
    void* block = cache.allocate(nbytes);
    cache.deallocate(block, nbytes);
    void* bigger = cache.allocate(HostBlockCache::round_size(nbytes) + 1);
    EXPECT_NE(bigger, block) << nbytes;
    void* same = cache.allocate(HostBlockCache::round_size(nbytes));
    EXPECT_EQ(same, block) << nbytes;
    cache.deallocate(same, HostBlockCache::round_size(nbytes));
    cache.deallocate(bigger, HostBlockCache::round_size(nbytes) + 1);
    cache.empty_cache();  // the next size's class may be this one's `bigger`
  }
  const CacheStats stats = cache.stats();
  EXPECT_EQ(stats.cache_hits, 7);
  EXPECT_EQ(stats.cache_misses, 14);
  EXPECT_EQ(stats.allocated_bytes, 0);
  EXPECT_EQ(stats.reserved_bytes, 0);
  EXPECT_EQ(stats.released_blocks, 14);
}

TEST_F(HostBlockCacheTest, UncachedAllocationsCountInTheSameStats) {
  HostBlockCache cache("[test]", kMemory, 64 * kMiB);
  void* block = cache.allocate(kMiB);
  cache.count_uncached_allocate(100, 128);
  CacheStats stats = cache.stats();
  EXPECT_EQ(stats.allocated_bytes, static_cast<int64_t>(kMiB + 100));
  EXPECT_EQ(stats.reserved_bytes, static_cast<int64_t>(kMiB + 128));
  EXPECT_EQ(stats.peak_allocated_bytes, static_cast<int64_t>(kMiB + 100));
  EXPECT_EQ(stats.allocation_count, 2);
  cache.count_uncached_free(100, 128);
  cache.deallocate(block, kMiB);
  stats = cache.stats();
  EXPECT_EQ(stats.allocated_bytes, 0);
  EXPECT_EQ(stats.reserved_bytes, static_cast<int64_t>(kMiB));
  EXPECT_EQ(stats.cached_bytes, static_cast<int64_t>(kMiB));
}

TEST_F(HostBlockCacheTest, OutOfMemoryEmptiesTheCacheRetriesOnceAndThrows) {
  HostBlockCache cache("[test]", kMemory, 64 * kMiB);
  cache.deallocate(cache.allocate(kMiB), kMiB);
  failures_left = 1;  // the retry succeeds
  void* block = cache.allocate(2 * kMiB);
  EXPECT_EQ(cache.stats().cached_bytes, 0) << "emptied before the retry";
  EXPECT_EQ(cache.stats().released_blocks, 1);
  cache.deallocate(block, 2 * kMiB);

  failures_left = 2;
  const std::string message = error_message([&] { cache.allocate(3 * kMiB); });
  EXPECT_NE(message.find("[test] out of memory allocating 3145728 bytes"), std::string::npos)
      << message;
  EXPECT_EQ(cache.stats().reserved_bytes, 0);
  EXPECT_EQ(cache.stats().allocated_bytes, 0);
}

}  // namespace
}  // namespace tandem
