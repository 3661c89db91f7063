// The pinned host allocator on the fake CUDA runtime (engine/cuda/runtime/pinned_allocator.h):
// size classes of at most an eighth of waste; blocks are reused only after the copies that read
// them, whatever device those ran on, with pooled events; staging memory made for a device makes
// no context elsewhere.

#include <set>
#include <thread>
#include <vector>

#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/pinned_allocator.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/error.h"
#include "tests/engine/cuda/runtime/fake_cuda_fixture.h"
#include "tests/support/cuda_busy_wait.h"

namespace tandem::cuda {
namespace {

using fake_cuda::calls_to;

using CudaHostPinned = fake_cuda::FakeCudaTest;

TEST_F(CudaHostPinned, BlocksAreReusedOnlyAfterTheirCopies) {
  PinnedHostAllocator pinned;
  const Stream copies = Stream::create(1);
  void* first = pinned.allocate(1000);
  EXPECT_EQ(pinned.stats().reserved_bytes, 4096);
  busy_wait(copies.handle(), 1, 1.0);  // a copy on cuda:1 reads the block
  EXPECT_TRUE(pinned.record_stream(first, copies.handle(), 1));
  pinned.deallocate(first, 1000);
  void* while_copying = pinned.allocate(1000);
  EXPECT_NE(while_copying, first);
  copies.synchronize();
  void* after = pinned.allocate(1000);
  EXPECT_EQ(after, first);
  EXPECT_EQ(pinned.stats().reserved_bytes, 2 * 4096);
  pinned.deallocate(while_copying, 1000);
  pinned.deallocate(after, 1000);
  pinned.empty_cache();
  EXPECT_EQ(pinned.stats().reserved_bytes, 0);
  EXPECT_EQ(fake_cuda::host_bytes_in_use(), 0);
  EXPECT_FALSE(pinned.record_stream(&pinned, nullptr, 0)) << "not a pinned block";
}

// Note [Host block cache]: eight size classes per power of two, not powers of two.
TEST_F(CudaHostPinned, SizeClassesWasteAtMostAnEighth) {
  PinnedHostAllocator pinned;
  constexpr size_t kMiB = size_t{1} << 20;
  void* block = pinned.allocate(kMiB + 1);  // a power of two would take 2 MiB
  EXPECT_EQ(pinned.stats().reserved_bytes, static_cast<int64_t>(kMiB + kMiB / 8));
  EXPECT_EQ(fake_cuda::host_bytes_in_use(), static_cast<int64_t>(kMiB + kMiB / 8));
  pinned.deallocate(block, kMiB + 1);
  pinned.empty_cache();
  // Each request is a quarter bigger than the last, so of a bigger class: every one is new.
  for (size_t nbytes = 32 << 10; nbytes < 64 * kMiB; nbytes = nbytes * 5 / 4 + 4097) {
    const int64_t reserved = pinned.stats().reserved_bytes;
    block = pinned.allocate(nbytes);
    const auto size = static_cast<size_t>(pinned.stats().reserved_bytes - reserved);
    EXPECT_GE(size, nbytes);
    EXPECT_LE(size - nbytes, nbytes / 8) << nbytes;
    pinned.deallocate(block, nbytes);
  }
  pinned.empty_cache();
  EXPECT_EQ(fake_cuda::host_bytes_in_use(), 0);
}

// A freed block waits for its copy outside the cache: a request of its class gets another block
// until the copy's event has passed, and the block itself after.
TEST_F(CudaHostPinned, AFreedBlockReturnsToItsClassWhenItsCopyIsDone) {
  PinnedHostAllocator pinned;
  const Stream copies = Stream::create(0);
  void* block = pinned.allocate(100'000);  // class 104 KiB
  busy_wait(copies.handle(), 0, 1.0);
  pinned.record_stream(block, copies.handle(), 0);
  pinned.deallocate(block, 100'000);
  EXPECT_EQ(pinned.detailed_stats().cached_bytes, 0) << "cached while the copy runs";
  EXPECT_EQ(pinned.detailed_stats().allocated_bytes, 100'000) << "counted until the copy is done";
  void* during = pinned.allocate(104 << 10);
  EXPECT_NE(during, block);
  fake_cuda::run(copies.handle(), 0);
  void* after = pinned.allocate(99'000);  // the same class
  EXPECT_EQ(after, block);
  const CacheStats stats = pinned.detailed_stats();
  EXPECT_EQ(stats.cache_hits, 1);
  EXPECT_EQ(stats.cache_misses, 2);
  EXPECT_EQ(stats.allocated_bytes, (104 << 10) + 99'000);
  pinned.deallocate(during, 104 << 10);
  pinned.deallocate(after, 99'000);
  pinned.empty_cache();
  EXPECT_EQ(pinned.detailed_stats().reserved_bytes, 0);
}

// DataLoader workers stage batches while the main thread frees the copied ones (for
// ThreadSanitizer: the allocator's lock, then the cache's, from several threads).
TEST_F(CudaHostPinned, ThreadsAllocateRecordAndFreeConcurrently) {
  PinnedHostAllocator pinned;
  const Stream copies = Stream::create(0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const size_t nbytes = size_t{4096} << ((i + t) % 5);
        auto* block = static_cast<char*>(pinned.allocate(nbytes));
        block[nbytes - 1] = static_cast<char>(i);
        pinned.record_stream(block, copies.handle(), 0);
        pinned.deallocate(block, nbytes);
        if (i % 10 == 0) fake_cuda::run(copies.handle(), 0);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  pinned.empty_cache();  // waits for the copies still pending
  const CacheStats stats = pinned.detailed_stats();
  EXPECT_EQ(stats.allocated_bytes, 0);
  EXPECT_EQ(stats.reserved_bytes, 0);
  EXPECT_EQ(stats.allocation_count, 200);
  EXPECT_EQ(fake_cuda::host_bytes_in_use(), 0);
}

TEST_F(CudaHostPinned, CopiesAreTrackedWithPooledEvents) {
  PinnedHostAllocator pinned;
  const Stream copies = Stream::create(0);
  for (int i = 0; i < 10; ++i) {
    void* block = pinned.allocate(4096);
    pinned.record_stream(block, copies.handle(), 0);
    pinned.deallocate(block, 4096);
    fake_cuda::run(copies.handle(), 0);
  }
  EXPECT_LE(calls_to("cudaEventCreateWithFlags").size(), 1u);
  EXPECT_EQ(calls_to("cudaEventDestroy").size(), 0u);
  EXPECT_EQ(calls_to("cudaEventRecord").size(), 10u);
  pinned.empty_cache();
}

// A DataLoader worker (a new thread) allocating staging memory for cuda:1.
TEST_F(CudaHostPinned, StagingMemoryForOneDeviceMakesNoContextOnAnother) {
  PinnedHostAllocator pinned;
  void* block = nullptr;
  std::thread worker([&] {
    const DeviceGuard guard(1);  // as CudaUploadStream::empty_host does
    block = pinned.allocate(1 << 16);
  });
  worker.join();
  EXPECT_EQ(fake_cuda::devices_with_context(), std::set<int>{1});
  ASSERT_EQ(calls_to("cudaHostAlloc").size(), 1u);
  EXPECT_EQ(calls_to("cudaHostAlloc")[0].device, 1);
  pinned.deallocate(block, 1 << 16);
  pinned.empty_cache();
}

TEST_F(CudaHostPinned, AnEventThatCannotBeRecordedBecomesAHostWaitAndIsCleared) {
  PinnedHostAllocator pinned;
  const Stream copies = Stream::create(0);
  void* block = pinned.allocate(4096);
  pinned.record_stream(block, copies.handle(), 0);
  fake_cuda::fail_next("cudaEventRecord", cudaErrorLaunchFailure);
  pinned.deallocate(block, 4096);
  EXPECT_EQ(calls_to("cudaStreamSynchronize").size(), 1u);
  EXPECT_EQ(pinned.allocate(4096), block) << "the host waited: reusable at once";
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  pinned.deallocate(block, 4096);
  pinned.empty_cache();
}

// N17: a failed event query (a sticky error on a GPU) throws, and must leave the copy pending
// with its event held: given back to the pool as well, the event would be handed out twice.
TEST_F(CudaHostPinned, AFailedEventQueryKeepsTheCopyPendingAndItsEventOutOfThePool) {
  PinnedHostAllocator pinned;
  const Stream copies = Stream::create(0);
  void* block = pinned.allocate(4096);
  pinned.record_stream(block, copies.handle(), 0);
  pinned.deallocate(block, 4096);
  fake_cuda::run(copies.handle(), 0);
  fake_cuda::fail_next("cudaEventQuery", cudaErrorLaunchFailure);
  EXPECT_THROW(pinned.allocate(4096), Error);
  void* after = pinned.allocate(4096);  // the query succeeds now: the copy is done
  EXPECT_EQ(after, block);
  const cudaEvent_t first = acquire_event(0);
  const cudaEvent_t second = acquire_event(0);
  EXPECT_NE(first, second) << "the copy's event went back to the pool twice";
  release_event(0, first);
  release_event(0, second);
  pinned.deallocate(after, 4096);
  pinned.empty_cache();
}

}  // namespace
}  // namespace tandem::cuda
