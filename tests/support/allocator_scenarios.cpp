#include "tests/support/allocator_scenarios.h"

#include <gtest/gtest.h>

#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/stream.h"
#include "tests/support/cuda_busy_wait.h"
#include "tests/support/error_message.h"

namespace tandem::testing::allocator_scenarios {
namespace {

using cuda::CachingAllocator;
using cuda::CachingAllocatorStats;
using cuda::Stream;
constexpr size_t kMiB = size_t{1} << 20;

}  // namespace

void rounds_sizes_and_serves_a_freed_block_again() {
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  CachingAllocator allocator(0);
  void* first = allocator.allocate(kMiB);
  EXPECT_EQ(allocator.detailed_stats().cache_misses, 1);
  const int64_t reserved = allocator.detailed_stats().reserved_bytes;
  allocator.deallocate(first, kMiB);
  void* again = allocator.allocate(kMiB);
  EXPECT_EQ(again, first);
  const CachingAllocatorStats stats = allocator.detailed_stats();
  EXPECT_EQ(stats.cache_hits, 1);
  EXPECT_EQ(stats.cache_misses, 1);
  EXPECT_EQ(stats.reserved_bytes, reserved);
  allocator.deallocate(again, kMiB);
  EXPECT_EQ(allocator.detailed_stats().allocated_bytes, 0);
}

void counts_allocated_reserved_and_peak() {
  CachingAllocator allocator(0);
  void* a = allocator.allocate(3 * kMiB);
  void* b = allocator.allocate(5 * kMiB);
  CachingAllocatorStats stats = allocator.detailed_stats();
  EXPECT_EQ(stats.allocated_bytes, static_cast<int64_t>(8 * kMiB));
  EXPECT_EQ(stats.peak_allocated_bytes, static_cast<int64_t>(8 * kMiB));
  // Both came from one 20 MiB segment (requests between 1 and 10 MiB share such segments).
  EXPECT_EQ(stats.reserved_bytes, static_cast<int64_t>(CachingAllocator::kMediumSegment));
  EXPECT_EQ(stats.segment_count, 1);
  allocator.deallocate(a, 3 * kMiB);
  stats = allocator.detailed_stats();
  EXPECT_EQ(stats.allocated_bytes, static_cast<int64_t>(5 * kMiB));
  EXPECT_EQ(stats.peak_allocated_bytes, static_cast<int64_t>(8 * kMiB));
  allocator.reset_peak_stats();
  EXPECT_EQ(allocator.detailed_stats().peak_allocated_bytes, static_cast<int64_t>(5 * kMiB));
  allocator.deallocate(b, 5 * kMiB);
  EXPECT_EQ(allocator.stats().allocated_bytes, 0);
  EXPECT_EQ(allocator.stats().allocation_count, 2);
}

void splits_segments_and_merges_freed_neighbours() {
  CachingAllocator allocator(0);
  // Small requests are carved one after another from a 2 MiB segment.
  char* a = static_cast<char*>(allocator.allocate(1000));
  char* b = static_cast<char*>(allocator.allocate(1000));
  char* c = static_cast<char*>(allocator.allocate(100 * 1024));
  EXPECT_EQ(b, a + 1024);
  EXPECT_EQ(c, b + 1024);
  EXPECT_EQ(allocator.detailed_stats().segment_count, 1);
  EXPECT_EQ(allocator.detailed_stats().reserved_bytes,
            static_cast<int64_t>(CachingAllocator::kSmallSegment));
  // Freed, the three merge back with the rest: 1 MiB fits again at the segment start, no
  // cudaMalloc.
  allocator.deallocate(b, 1000);
  allocator.deallocate(a, 1000);
  allocator.deallocate(c, 100 * 1024);
  void* whole = allocator.allocate(kMiB);
  EXPECT_EQ(whole, a);
  EXPECT_EQ(allocator.detailed_stats().cache_misses, 1);
  allocator.deallocate(whole, kMiB);
  // A large request gets a segment of its own, rounded up to 2 MiB.
  void* large = allocator.allocate(11 * kMiB + 1);
  EXPECT_EQ(allocator.detailed_stats().reserved_bytes,
            static_cast<int64_t>(CachingAllocator::kSmallSegment + 12 * kMiB));
  allocator.deallocate(large, 11 * kMiB + 1);
}

void empty_cache_gives_every_free_segment_back(const Runtime& runtime) {
  CachingAllocator allocator(0);
  void* kept = allocator.allocate(4 * kMiB);
  void* freed = allocator.allocate(30 * kMiB);
  allocator.deallocate(freed, 30 * kMiB);
  allocator.empty_cache();
  CachingAllocatorStats stats = allocator.detailed_stats();
  EXPECT_EQ(stats.reserved_bytes, static_cast<int64_t>(CachingAllocator::kMediumSegment));
  EXPECT_EQ(stats.cuda_free_count, 1);
  if (runtime.device_bytes_in_use) {
    EXPECT_EQ(runtime.device_bytes_in_use(),
              static_cast<int64_t>(CachingAllocator::kMediumSegment));
  }
  allocator.deallocate(kept, 4 * kMiB);
  allocator.empty_cache();
  EXPECT_EQ(allocator.detailed_stats().reserved_bytes, 0);
  if (runtime.device_bytes_in_use) {
    EXPECT_EQ(runtime.device_bytes_in_use(), 0);
  }
}

void blocks_belong_to_their_stream() {
  CachingAllocator allocator(0);
  const Stream side = Stream::create(0);
  void* on_default = allocator.allocate(kMiB, nullptr);
  allocator.deallocate(on_default, kMiB);
  // The free block belongs to the default stream: the side stream gets memory of its own.
  void* on_side = allocator.allocate(kMiB, side.handle());
  EXPECT_NE(on_side, on_default);
  EXPECT_EQ(allocator.detailed_stats().cache_misses, 2);
  allocator.deallocate(on_side, kMiB);
}

void recorded_stream_delays_reuse_until_it_has_run() {
  CachingAllocator allocator(0);
  const Stream side = Stream::create(0);
  void* block = allocator.allocate(kMiB, nullptr);
  cuda::busy_wait(side.handle(), 0, 200.0);  // the side stream "uses" the block for 200 ms
  allocator.record_stream(block, side.handle());
  allocator.deallocate(block, kMiB);
  EXPECT_EQ(allocator.detailed_stats().pending_free_blocks, 1);
  void* while_busy = allocator.allocate(kMiB, nullptr);
  EXPECT_NE(while_busy, block) << "a block still in use on another stream was handed out";
  side.synchronize();
  allocator.deallocate(while_busy, kMiB);
  void* after = allocator.allocate(kMiB, nullptr);  // processes the completed event first
  EXPECT_EQ(allocator.detailed_stats().pending_free_blocks, 0);
  EXPECT_EQ(after, block) << "best fit: the older, lower block of the merged segment";
  allocator.deallocate(after, kMiB);
}

void threads_allocate_and_free_concurrently_without_overlap(const Runtime& runtime) {
  CachingAllocator allocator(0);
  std::mutex mutex;
  std::map<uintptr_t, uintptr_t> live;  // start → end of every block handed out, all threads
  bool overlap = false;
  auto worker = [&](unsigned seed) {
    std::mt19937 random(seed);
    std::vector<std::pair<void*, size_t>> mine;
    for (int i = 0; i < runtime.stress_steps; ++i) {
      if (mine.empty() || (mine.size() < 16 && random() % 2 == 0)) {
        const size_t n = 1 + random() % (3 * kMiB);  // small and large pools both
        void* ptr = allocator.allocate(n);
        const auto start = reinterpret_cast<uintptr_t>(ptr);
        std::lock_guard lock(mutex);
        const auto next = live.lower_bound(start);
        if (next != live.end() && next->first < start + n) overlap = true;
        if (next != live.begin() && std::prev(next)->second > start) overlap = true;
        live.emplace(start, start + n);
        mine.emplace_back(ptr, n);
      } else {
        const auto [ptr, n] = mine.back();
        mine.pop_back();
        {
          std::lock_guard lock(mutex);
          live.erase(reinterpret_cast<uintptr_t>(ptr));
        }
        allocator.deallocate(ptr, n);
      }
    }
    for (const auto& [ptr, n] : mine) {
      {
        std::lock_guard lock(mutex);
        live.erase(reinterpret_cast<uintptr_t>(ptr));
      }
      allocator.deallocate(ptr, n);
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) threads.emplace_back(worker, t);
  for (auto& thread : threads) thread.join();
  EXPECT_FALSE(overlap) << "two live blocks shared memory";
  const CachingAllocatorStats stats = allocator.detailed_stats();
  EXPECT_EQ(stats.allocated_bytes, 0);
  EXPECT_GT(stats.cache_hits, stats.cache_misses);
}

void out_of_memory_is_a_clear_error(const Runtime& runtime) {
  CachingAllocator allocator(0);
  const std::string message =
      error_message([&] { allocator.allocate(size_t{1} << 50); });  // a petabyte
  EXPECT_NE(message.find("[cuda allocator] out of memory on cuda:0"), std::string::npos) << message;
  if (!runtime.out_of_memory_detail.empty()) {
    EXPECT_NE(message.find(runtime.out_of_memory_detail), std::string::npos) << message;
  }
  // The allocator still works.
  void* ok = allocator.allocate(kMiB);
  EXPECT_NE(ok, nullptr);
  allocator.deallocate(ok, kMiB);
}

}  // namespace tandem::testing::allocator_scenarios
