// The pinned host allocator on the fake CUDA runtime (engine/cuda/runtime/pinned_allocator.h):
// blocks are reused only after the copies that read them, whatever device those ran on, with pooled
// events; staging memory made for a device makes no context elsewhere.

#include <set>
#include <thread>

#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/pinned_allocator.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/error.h"
#include "tests/engine/cuda_host/fake_cuda_fixture.h"

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
