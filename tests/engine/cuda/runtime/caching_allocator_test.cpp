// The caching allocator (engine/cuda/runtime/caching_allocator.h) on the fake CUDA runtime: the
// scenarios the CudaAllocatorGpu tests run on a GPU (tests/support/allocator_scenarios.h), here
// on the CPU with the fake's exact checks, and the paths a GPU test cannot reach on purpose (an
// out-of-memory retry that succeeds).

#include "engine/cuda/runtime/caching_allocator.h"
#include "tests/engine/cuda/runtime/fake_cuda_fixture.h"
#include "tests/support/allocator_scenarios.h"

namespace tandem::cuda {
namespace {

using fake_cuda::calls_to;
constexpr size_t kMiB = size_t{1} << 20;

using CudaHostAllocator = fake_cuda::FakeCudaTest;
namespace scenarios = testing::allocator_scenarios;

// The fake knows every byte it hands out (1 GiB a device unless a test says otherwise). Its stress
// test takes 500 steps a thread, a quarter of the GPU's: this binary runs under ThreadSanitizer
// too.
scenarios::Runtime fake_runtime() {
  return {.stress_steps = 500,
          .device_bytes_in_use = [] { return fake_cuda::device_bytes_in_use(0); },
          .out_of_memory_detail = "the device has 1024 MiB free of 1024 MiB"};
}

TEST_F(CudaHostAllocator, RoundsSizesAndServesAFreedBlockAgain) {
  scenarios::rounds_sizes_and_serves_a_freed_block_again();
  EXPECT_EQ(calls_to("cudaMalloc").size(), 1u);
}

TEST_F(CudaHostAllocator, CountsAllocatedReservedAndPeak) {
  scenarios::counts_allocated_reserved_and_peak();
}

TEST_F(CudaHostAllocator, SplitsSegmentsAndMergesFreedNeighbours) {
  scenarios::splits_segments_and_merges_freed_neighbours();
}

TEST_F(CudaHostAllocator, EmptyCacheGivesEveryFreeSegmentBack) {
  scenarios::empty_cache_gives_every_free_segment_back(fake_runtime());
}

TEST_F(CudaHostAllocator, BlocksBelongToTheirStream) {
  scenarios::blocks_belong_to_their_stream();
}

TEST_F(CudaHostAllocator, RecordedStreamDelaysReuseUntilItHasRun) {
  scenarios::recorded_stream_delays_reuse_until_it_has_run();
}

TEST_F(CudaHostAllocator, ThreadsAllocateAndFreeConcurrentlyWithoutOverlap) {
  scenarios::threads_allocate_and_free_concurrently_without_overlap(fake_runtime());
}

TEST_F(CudaHostAllocator, OutOfMemoryIsAClearError) {
  scenarios::out_of_memory_is_a_clear_error(fake_runtime());
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
