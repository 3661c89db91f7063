// The caching allocator (engine/cuda/runtime/caching_allocator.h) on the fake CUDA runtime: the
// expectations of the CudaAllocatorGpu tests, run on the CPU, and the paths a GPU test cannot
// reach on purpose (an out-of-memory retry that succeeds).

#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/stream.h"
#include "tests/engine/cuda_host/fake_cuda_fixture.h"
#include "tests/support/error_message.h"

namespace tandem::cuda {
namespace {

using fake_cuda::calls_to;
using testing::error_message;
constexpr size_t kMiB = size_t{1} << 20;

using CudaHostAllocator = fake_cuda::FakeCudaTest;

TEST_F(CudaHostAllocator, RoundsSizesAndServesAFreedBlockAgain) {
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
  EXPECT_EQ(calls_to("cudaMalloc").size(), 1u);
}

TEST_F(CudaHostAllocator, CountsAllocatedReservedAndPeak) {
  CachingAllocator allocator(0);
  void* a = allocator.allocate(3 * kMiB);
  void* b = allocator.allocate(5 * kMiB);
  CachingAllocatorStats stats = allocator.detailed_stats();
  EXPECT_EQ(stats.allocated_bytes, static_cast<int64_t>(8 * kMiB));
  EXPECT_EQ(stats.peak_allocated_bytes, static_cast<int64_t>(8 * kMiB));
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

TEST_F(CudaHostAllocator, SplitsSegmentsAndMergesFreedNeighbours) {
  CachingAllocator allocator(0);
  char* a = static_cast<char*>(allocator.allocate(1000));
  char* b = static_cast<char*>(allocator.allocate(1000));
  char* c = static_cast<char*>(allocator.allocate(100 * 1024));
  EXPECT_EQ(b, a + 1024);
  EXPECT_EQ(c, b + 1024);
  EXPECT_EQ(allocator.detailed_stats().segment_count, 1);
  EXPECT_EQ(allocator.detailed_stats().reserved_bytes,
            static_cast<int64_t>(CachingAllocator::kSmallSegment));
  allocator.deallocate(b, 1000);
  allocator.deallocate(a, 1000);
  allocator.deallocate(c, 100 * 1024);
  void* whole = allocator.allocate(kMiB);
  EXPECT_EQ(whole, a);
  EXPECT_EQ(allocator.detailed_stats().cache_misses, 1);
  allocator.deallocate(whole, kMiB);
  void* large = allocator.allocate(11 * kMiB + 1);
  EXPECT_EQ(allocator.detailed_stats().reserved_bytes,
            static_cast<int64_t>(CachingAllocator::kSmallSegment + 12 * kMiB));
  allocator.deallocate(large, 11 * kMiB + 1);
}

TEST_F(CudaHostAllocator, EmptyCacheGivesEveryFreeSegmentBack) {
  CachingAllocator allocator(0);
  void* kept = allocator.allocate(4 * kMiB);
  void* freed = allocator.allocate(30 * kMiB);
  allocator.deallocate(freed, 30 * kMiB);
  allocator.empty_cache();
  CachingAllocatorStats stats = allocator.detailed_stats();
  EXPECT_EQ(stats.reserved_bytes, static_cast<int64_t>(CachingAllocator::kMediumSegment));
  EXPECT_EQ(stats.cuda_free_count, 1);
  EXPECT_EQ(fake_cuda::device_bytes_in_use(0),
            static_cast<int64_t>(CachingAllocator::kMediumSegment));
  allocator.deallocate(kept, 4 * kMiB);
  allocator.empty_cache();
  EXPECT_EQ(allocator.detailed_stats().reserved_bytes, 0);
  EXPECT_EQ(fake_cuda::device_bytes_in_use(0), 0);
}

TEST_F(CudaHostAllocator, BlocksBelongToTheirStream) {
  CachingAllocator allocator(0);
  const Stream side = Stream::create(0);
  void* on_default = allocator.allocate(kMiB, nullptr);
  allocator.deallocate(on_default, kMiB);
  void* on_side = allocator.allocate(kMiB, side.handle());
  EXPECT_NE(on_side, on_default);
  EXPECT_EQ(allocator.detailed_stats().cache_misses, 2);
  allocator.deallocate(on_side, kMiB);
}

TEST_F(CudaHostAllocator, RecordedStreamDelaysReuseUntilItHasRun) {
  CachingAllocator allocator(0);
  const Stream side = Stream::create(0);
  void* block = allocator.allocate(kMiB, nullptr);
  busy_wait(side.handle(), 0, 200.0);  // the side stream "uses" the block
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

TEST_F(CudaHostAllocator, ThreadsAllocateAndFreeConcurrentlyWithoutOverlap) {
  CachingAllocator allocator(0);
  std::mutex mutex;
  std::map<uintptr_t, uintptr_t> live;  // start → end of every block handed out, all threads
  bool overlap = false;
  auto worker = [&](unsigned seed) {
    std::mt19937 random(seed);
    std::vector<std::pair<void*, size_t>> mine;
    for (int i = 0; i < 500; ++i) {
      if (mine.empty() || (mine.size() < 16 && random() % 2 == 0)) {
        const size_t n = 1 + random() % (3 * kMiB);
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

TEST_F(CudaHostAllocator, OutOfMemoryIsAClearError) {
  CachingAllocator allocator(0);
  const std::string message = error_message([&] { allocator.allocate(size_t{1} << 50); });
  EXPECT_NE(message.find("[cuda allocator] out of memory on cuda:0"), std::string::npos) << message;
  EXPECT_NE(message.find("the device has 1024 MiB free of 1024 MiB"), std::string::npos) << message;
  void* ok = allocator.allocate(kMiB);
  EXPECT_NE(ok, nullptr);
  allocator.deallocate(ok, kMiB);
}

// Note [Workspace without emptying the cache]: what does not fit is refused at once, the cache
// kept and the device not synchronised; what the cache holds is served as allocate() would.
TEST_F(CudaHostAllocator, TryAllocateNeitherEmptiesTheCacheNorThrows) {
  fake_cuda::reset({.memory_bytes = 64 * kMiB});
  CachingAllocator allocator(0);
  void* held = allocator.allocate(20 * kMiB);
  void* cached = allocator.allocate(20 * kMiB);
  allocator.deallocate(cached, 20 * kMiB);  // a free 20 MiB segment in the cache
  const int64_t reserved = allocator.detailed_stats().reserved_bytes;
  EXPECT_EQ(allocator.try_allocate(30 * kMiB), nullptr);  // 24 MiB free on the device
  EXPECT_TRUE(calls_to("cudaDeviceSynchronize").empty());
  EXPECT_TRUE(calls_to("cudaFree").empty());
  EXPECT_EQ(allocator.detailed_stats().reserved_bytes, reserved);
  void* from_cache = allocator.try_allocate(20 * kMiB);
  EXPECT_EQ(from_cache, cached);
  EXPECT_EQ(allocator.detailed_stats().cache_hits, 1);
  allocator.deallocate(from_cache, 20 * kMiB);
  // allocate() of the same 30 MiB empties the cache, and then it fits.
  void* big = allocator.allocate(30 * kMiB);
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(calls_to("cudaFree").size(), 1u);
  allocator.deallocate(big, 30 * kMiB);
  allocator.deallocate(held, 20 * kMiB);
}

}  // namespace
}  // namespace tandem::cuda
