// The caching allocator across streams and devices on the fake CUDA runtime: the out-of-memory
// retry that succeeds (and synchronises before cudaFree), record_stream with a stream of another
// device, destroyed streams (Note [Stream ids]), and failures it ignores and clears.

#include <thread>
#include <vector>

#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/pinned_allocator.h"
#include "engine/cuda/runtime/stream.h"
#include "tests/engine/cuda/runtime/fake_cuda_fixture.h"
#include "tests/support/cuda_busy_wait.h"

namespace tandem::cuda {
namespace {

using fake_cuda::calls;
using fake_cuda::calls_to;
constexpr size_t kMiB = size_t{1} << 20;

using CudaHostAllocatorStreams = fake_cuda::FakeCudaTest;

// Position of the first call to `function` at or after `from` in the trace; -1 if none.
int find_call(const std::vector<fake_cuda::Call>& trace, const std::string& function,
              int from = 0) {
  for (int i = from; i < static_cast<int>(trace.size()); ++i) {
    if (trace[static_cast<size_t>(i)].function == function) return i;
  }
  return -1;
}

TEST_F(CudaHostAllocatorStreams, OutOfMemoryRetryFreesTheCacheAfterASyncAndSucceeds) {
  fake_cuda::reset({.memory_bytes = 64 * kMiB});
  CachingAllocator allocator(0);
  void* cached = allocator.allocate(40 * kMiB);
  busy_wait(nullptr, 0, 1.0);  // a kernel still reads the block when it is freed
  allocator.deallocate(cached, 40 * kMiB);
  void* retried = allocator.allocate(50 * kMiB);  // fits only once the 40 MiB are given back
  EXPECT_NE(retried, nullptr);
  const CachingAllocatorStats stats = allocator.detailed_stats();
  EXPECT_EQ(stats.cuda_free_count, 1);
  EXPECT_EQ(stats.reserved_bytes, static_cast<int64_t>(50 * kMiB));
  EXPECT_EQ(calls_to("cudaMalloc").size(), 3u) << "the 40 MiB, the failed 50 MiB, the retry";
  const std::vector<fake_cuda::Call> trace = calls();
  const int free_at = find_call(trace, "cudaFree");
  ASSERT_GE(free_at, 0);
  const int sync_at = find_call(trace, "cudaDeviceSynchronize");
  EXPECT_TRUE(sync_at >= 0 && sync_at < free_at) << "cudaFree before the device synchronised";
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess) << "the failed cudaMalloc is cleared";
  allocator.deallocate(retried, 50 * kMiB);
}

TEST_F(CudaHostAllocatorStreams, EmptyCacheWaitsForQueuedWorkBeforeCudaFree) {
  CachingAllocator allocator(0);
  void* block = allocator.allocate(kMiB);
  allocator.deallocate(block, kMiB);
  busy_wait(nullptr, 0, 1.0);
  allocator.empty_cache();  // the fixture fails on "cudaFree ... while work is still queued"
  EXPECT_EQ(allocator.detailed_stats().reserved_bytes, 0);
  allocator.empty_cache();
  EXPECT_EQ(calls_to("cudaDeviceSynchronize").size(), 1u) << "nothing to free, nothing to wait";
}

TEST_F(CudaHostAllocatorStreams, AStreamOfAnotherDeviceDelaysReuseWithAnEventOfItsOwnDevice) {
  CachingAllocator allocator(0);
  const Stream peer = Stream::create(1);
  void* block = allocator.allocate(kMiB, nullptr);
  busy_wait(peer.handle(), 1, 1.0);  // cuda:1 reads the block (a peer copy, say)
  allocator.record_stream(block, peer.handle());
  allocator.deallocate(block, kMiB);
  EXPECT_EQ(allocator.detailed_stats().pending_free_blocks, 1);
  void* while_busy = allocator.allocate(kMiB, nullptr);
  EXPECT_NE(while_busy, block);
  fake_cuda::run(peer.handle(), 1);
  void* after = allocator.allocate(kMiB, nullptr);
  EXPECT_EQ(after, block);
  EXPECT_EQ(calls_to("cudaStreamSynchronize").size(), 0u) << "an event, not a host wait";
  allocator.deallocate(while_busy, kMiB);
  allocator.deallocate(after, kMiB);
}

TEST_F(CudaHostAllocatorStreams, ADestroyedStreamsBlocksGoToTheDefaultStreamOnceItsWorkHasRun) {
  CachingAllocator allocator(0);
  void* old_block = nullptr;
  cudaStream_t old_handle = nullptr;
  {
    const Stream copies = Stream::create(0);
    old_handle = copies.handle();
    old_block = allocator.allocate(kMiB, copies.handle());
    busy_wait(copies.handle(), 0, 1.0);  // still writing the block when the stream goes
    allocator.deallocate(old_block, kMiB);
  }
  const Stream reused = Stream::create(0);
  ASSERT_EQ(reused.handle(), old_handle) << "the fake hands out the destroyed stream's handle";
  void* on_reused = allocator.allocate(kMiB, reused.handle());
  EXPECT_NE(on_reused, old_block) << "a new stream with an old handle got the old stream's block";
  void* too_early = allocator.allocate(kMiB, nullptr);
  EXPECT_NE(too_early, old_block) << "handed out before the destroyed stream's work ran";
  allocator.deallocate(too_early, kMiB);
  fake_cuda::run_all();
  const int64_t misses = allocator.detailed_stats().cache_misses;
  void* on_default = allocator.allocate(kMiB, nullptr);
  EXPECT_EQ(on_default, old_block) << "best fit: the lowest of the default stream's free blocks";
  EXPECT_EQ(allocator.detailed_stats().cache_misses, misses);
  allocator.deallocate(on_default, kMiB);
  allocator.deallocate(on_reused, kMiB);
}

TEST_F(CudaHostAllocatorStreams, ABlockStillLiveWhenItsStreamIsDestroyedReturnsToTheDefaultStream) {
  CachingAllocator allocator(0);
  void* live = nullptr;
  {
    const Stream copies = Stream::create(0);
    live = allocator.allocate(kMiB, copies.handle());
  }
  allocator.deallocate(live, kMiB);  // after the stream is gone (an upload's tensor, say)
  EXPECT_EQ(allocator.allocate(kMiB, nullptr), live);
  allocator.deallocate(live, kMiB);
}

TEST_F(CudaHostAllocatorStreams, ABlockFreedAsItsDestroyedStreamRetiresIsReusedByTheDefault) {
  CachingAllocator allocator(0);
  const Stream reader = Stream::create(0);
  void* block = nullptr;
  {
    const Stream copies = Stream::create(0);
    block = allocator.allocate(kMiB, copies.handle());
    busy_wait(copies.handle(), 0, 1.0);
  }  // retiring: waits for the copy stream's work
  allocator.record_stream(block, reader.handle());
  busy_wait(reader.handle(), 0, 1.0);
  allocator.deallocate(block, kMiB);  // waits for the reader
  fake_cuda::run_all();               // both events pass at once
  const int64_t misses = allocator.detailed_stats().cache_misses;
  EXPECT_EQ(allocator.allocate(kMiB, nullptr), block);
  EXPECT_EQ(allocator.detailed_stats().cache_misses, misses);
  allocator.deallocate(block, kMiB);
}

TEST_F(CudaHostAllocatorStreams, AnEventThatCannotBeRecordedBecomesAHostWaitAndIsCleared) {
  CachingAllocator allocator(0);
  const Stream side = Stream::create(0);
  void* block = allocator.allocate(kMiB, nullptr);
  allocator.record_stream(block, side.handle());
  busy_wait(side.handle(), 0, 1.0);
  fake_cuda::fail_next("cudaEventRecord", cudaErrorLaunchFailure);
  fake_cuda::fail_next("cudaStreamSynchronize", cudaErrorLaunchFailure);
  allocator.deallocate(block, kMiB);
  EXPECT_EQ(allocator.detailed_stats().pending_free_blocks, 0);
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  EXPECT_NO_THROW(busy_wait(nullptr, 0, 1.0));
}

// N12: cuda:1's default stream cannot be named while cuda:0 is current (nullptr is cuda:0's), so
// with the switch to cuda:1 failing, the block that stream still reads is neither recorded nor
// waited for: it stays pending instead of being reused behind a wait for the wrong stream.
TEST_F(CudaHostAllocatorStreams, AFreeWhoseDeviceCannotBeMadeCurrentKeepsTheBlockPending) {
  CachingAllocator allocator(1);
  const Stream side = Stream::create(1);
  void* block = allocator.allocate(kMiB, side.handle());
  allocator.record_stream(block, nullptr);  // read by cuda:1's default stream too
  busy_wait(nullptr, 1, 1.0);
  set_device(0);
  fake_cuda::fail_next("cudaSetDevice", cudaErrorDevicesUnavailable);
  allocator.deallocate(block, kMiB);
  EXPECT_EQ(calls_to("cudaStreamSynchronize").size(), 0u) << "a wait for cuda:0's stream";
  EXPECT_EQ(allocator.detailed_stats().pending_free_blocks, 1);
  void* next = allocator.allocate(kMiB, side.handle());
  EXPECT_NE(next, block);
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  allocator.deallocate(next, kMiB);
}

TEST_F(CudaHostAllocatorStreams, AFreeWhoseDeviceCannotBeMadeCurrentKeepsThePinnedBlockPending) {
  PinnedHostAllocator pinned;
  void* block = pinned.allocate(4096);
  pinned.record_stream(block, nullptr, 1);  // a copy on cuda:1's default stream reads it
  set_device(0);
  fake_cuda::fail_next("cudaSetDevice", cudaErrorDevicesUnavailable);
  pinned.deallocate(block, 4096);
  EXPECT_EQ(calls_to("cudaStreamSynchronize").size(), 0u) << "a wait for cuda:0's stream";
  void* next = pinned.allocate(4096);
  EXPECT_NE(next, block);
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  pinned.deallocate(next, 4096);
}

// Streams come and go on several threads while blocks are allocated on them, recorded on other
// streams and freed (for ThreadSanitizer: the stream registry, the event pool and the allocators'
// retirement run concurrently).
TEST_F(CudaHostAllocatorStreams, ThreadsCreateUseAndDestroyStreamsConcurrently) {
  CachingAllocator allocator(0);
  const Stream shared = Stream::create(0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        const Stream own = Stream::create(0);
        void* block = allocator.allocate(kMiB / 4 * static_cast<size_t>(1 + i % 3), own.handle());
        allocator.record_stream(block, shared.handle());
        stream_wait_stream(shared.handle(), 0, own.handle(), 0);
        allocator.deallocate(block, kMiB);
        if (i % 5 == 0) fake_cuda::run_all();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  fake_cuda::run_all();
  allocator.empty_cache();
  const CachingAllocatorStats stats = allocator.detailed_stats();
  EXPECT_EQ(stats.allocated_bytes, 0);
  EXPECT_EQ(stats.pending_free_blocks, 0);
  EXPECT_EQ(stats.reserved_bytes, 0) << "every destroyed stream's segment came back";
}

}  // namespace
}  // namespace tandem::cuda
