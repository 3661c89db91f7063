// Streams and events on the fake CUDA runtime (engine/cuda/runtime/stream.h): ids that survive
// handle reuse (Note [Stream ids]), pooled events for stream waits (Note [Event pool]), and errors
// that destructors ignore and clear.

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/error.h"
#include "tests/engine/cuda/runtime/fake_cuda_fixture.h"
#include "tests/support/cuda_busy_wait.h"
#include "tests/support/error_message.h"

namespace tandem::cuda {
namespace {

using fake_cuda::calls_to;
using tandem::testing::contains;
using tandem::testing::error_message;

using CudaHostStream = fake_cuda::FakeCudaTest;

TEST_F(CudaHostStream, GuardsMakeAStreamCurrentAndRestoreTheDefault) {
  EXPECT_EQ(current_stream(0), nullptr);
  {
    const Stream side = Stream::create(0);
    const StreamGuard guard(side);
    EXPECT_EQ(current_stream(0), side.handle());
    EXPECT_EQ(current_stream(1), nullptr);
  }
  EXPECT_EQ(current_stream(0), nullptr);
}

TEST_F(CudaHostStream, IdsAreNeverReusedWhenHandlesAre) {
  cudaStream_t first_handle = nullptr;
  uint64_t first_id = 0;
  {
    const Stream first = Stream::create(0);
    first_handle = first.handle();
    first_id = first.id();
    EXPECT_NE(first_id, 0u);
    EXPECT_EQ(stream_info(first_handle, 0).id, first_id);
  }
  const Stream second = Stream::create(1);
  ASSERT_EQ(second.handle(), first_handle) << "the fake hands out the destroyed stream's handle";
  EXPECT_NE(second.id(), first_id);
  EXPECT_EQ(stream_info(second.handle(), 0).id, second.id());
  EXPECT_EQ(stream_info(second.handle(), 0).device, 1);
  EXPECT_EQ(stream_info(nullptr, 1).id, 0u);
  EXPECT_EQ(Stream::default_stream(1).id(), 0u);
  Stream moved = Stream::create(0);
  const uint64_t moved_id = moved.id();
  const Stream target = std::move(moved);
  EXPECT_EQ(target.id(), moved_id);
}

// N9: a stream made elsewhere would be remembered forever under its first caller's device; it is
// refused, by the allocator too, which would otherwise key blocks by it.
TEST_F(CudaHostStream, AStreamCreatedElsewhereIsRefused) {
  cudaStream_t external = nullptr;
  ASSERT_EQ(cudaStreamCreateWithPriority(&external, cudaStreamNonBlocking, 0), cudaSuccess);
  const std::string message = error_message([&] { stream_info(external, 0); });
  EXPECT_TRUE(contains(message, "[cuda stream] stream ")) << message;
  EXPECT_TRUE(contains(message, " was not made by Stream::create")) << message;
  CachingAllocator allocator(1);
  void* block = allocator.allocate(512);
  EXPECT_THROW(allocator.record_stream(block, external), Error);
  EXPECT_THROW(allocator.allocate(512, external), Error);
  allocator.deallocate(block, 512);
  EXPECT_EQ(cudaStreamDestroy(external), cudaSuccess);
}

// N9: the per-thread default stream is a default stream of the device asked about, as the legacy
// one is; not a stream of its own bound to the first caller's device.
TEST_F(CudaHostStream, ThePerThreadStreamIsTheDefaultStreamOfItsDevice) {
  for (const cudaStream_t handle : {cudaStreamLegacy, cudaStreamPerThread}) {
    EXPECT_EQ(stream_info(handle, 0).id, 0u);
    EXPECT_EQ(stream_info(handle, 1).id, 0u);
    EXPECT_EQ(stream_info(handle, 1).device, 1);
  }
}

TEST_F(CudaHostStream, StreamWaitsReusePooledEvents) {
  const Stream a = Stream::create(0);
  const Stream b = Stream::create(0);
  stream_wait_stream(b.handle(), 0, a.handle(), 0);
  const size_t created = calls_to("cudaEventCreateWithFlags").size();
  EXPECT_LE(created, 1u);
  for (int i = 0; i < 50; ++i) stream_wait_stream(b.handle(), 0, a.handle(), 0);
  EXPECT_EQ(calls_to("cudaEventCreateWithFlags").size(), created);
  EXPECT_EQ(calls_to("cudaEventDestroy").size(), 0u);
  EXPECT_EQ(calls_to("cudaEventRecord").size(), 51u);
  EXPECT_EQ(calls_to("cudaStreamWaitEvent").size(), 51u);
}

TEST_F(CudaHostStream, AWaitAcrossDevicesOrdersTheWaitingStreamAfterTheProducer) {
  set_device(0);
  const Stream producer = Stream::create(0);
  const Stream waiting = Stream::create(1);
  busy_wait(producer.handle(), 0, 1.0);
  stream_wait_stream(waiting.handle(), 1, producer.handle(), 0);
  busy_wait(producer.handle(), 0, 1.0);  // queued after the wait: not waited for
  EXPECT_FALSE(waiting.query());
  fake_cuda::run(waiting.handle(), 1);
  EXPECT_TRUE(waiting.query());
  EXPECT_EQ(fake_cuda::queued(producer.handle(), 0), 1);
  EXPECT_EQ(current_device(), 0);
}

// What the retirement listener of the test below saw and frees.
struct Retirements {
  std::mutex mutex;
  std::vector<uint64_t> ids;
  CachingAllocator* allocator = nullptr;
  void* block = nullptr;  ///< freed when its stream retires, as a cuBLAS workspace is
  uint64_t block_stream = 0;
};

Retirements& retirements() {
  static Retirements all;
  return all;
}

void remember_retirement(int /*device*/, uint64_t id) noexcept {
  Retirements& all = retirements();
  std::lock_guard lock(all.mutex);
  all.ids.push_back(id);
  if (id == all.block_stream && all.block != nullptr) {
    all.allocator->deallocate(all.block, 1 << 20);
    all.block = nullptr;
  }
}

// N8: a cache keyed by stream ids (the cuBLAS workspaces) hears of a stream's end before the
// stream's blocks retire, so that what it frees then retires with them.
TEST_F(CudaHostStream, ListenersHearOfAStreamsEndBeforeItsBlocksRetire) {
  static const bool registered = (on_stream_retired(&remember_retirement), true);
  EXPECT_TRUE(registered);
  CachingAllocator allocator(0);
  Retirements& all = retirements();
  uint64_t id = 0;
  void* block = nullptr;
  {
    const Stream side = Stream::create(0);
    id = side.id();
    block = allocator.allocate(1 << 20, side.handle());
    std::lock_guard lock(all.mutex);
    all.ids.clear();
    all.allocator = &allocator;
    all.block = block;
    all.block_stream = id;
  }
  {
    std::lock_guard lock(all.mutex);
    EXPECT_EQ(all.ids, std::vector<uint64_t>{id});
    EXPECT_EQ(all.block, nullptr);
  }
  fake_cuda::run_all();
  EXPECT_EQ(allocator.allocate(1 << 20, nullptr), block) << "retired to the default stream";
  allocator.deallocate(block, 1 << 20);
}

// N10: an event made per loss, per batch or per collective comes from the pool and goes back.
TEST_F(CudaHostStream, PooledEventsGoBackToThePool) {
  const Stream side = Stream::create(1);
  cudaEvent_t first = nullptr;
  {
    Event event = Event::pooled(1);
    event.record(side);
    first = event.handle();
    const Event moved = std::move(event);
  }
  const size_t created = calls_to("cudaEventCreateWithFlags").size();
  const Event again = Event::pooled(1);
  EXPECT_EQ(again.handle(), first);
  EXPECT_EQ(calls_to("cudaEventCreateWithFlags").size(), created);
  EXPECT_EQ(calls_to("cudaEventDestroy").size(), 0u);
}

TEST_F(CudaHostStream, WaitsFromManyThreadsNeedFewEvents) {
  const Stream a = Stream::create(0);
  const Stream b = Stream::create(1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        if (t % 2 == 0) stream_wait_stream(b.handle(), 1, a.handle(), 0);
        if (t % 2 == 1) stream_wait_stream(a.handle(), 0, b.handle(), 1);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_LE(calls_to("cudaEventCreateWithFlags").size(), 4u) << "at most one per waiting thread";
}

TEST_F(CudaHostStream, DestroyFailuresAreClearedNotBlamedOnTheNextKernel) {
  fake_cuda::fail_next("cudaStreamDestroy", cudaErrorLaunchFailure);
  { const Stream side = Stream::create(0); }
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  fake_cuda::fail_next("cudaEventDestroy", cudaErrorLaunchFailure);
  { const Event event; }
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  EXPECT_NO_THROW(busy_wait(nullptr, 0, 1.0));
}

TEST_F(CudaHostStream, EventsCaptureQueuedWork) {
  const Stream side = Stream::create(0);
  Event event;
  busy_wait(side.handle(), 0, 1.0);
  event.record(side);
  EXPECT_FALSE(event.query());
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess) << "not ready is no error";
  event.synchronize();
  EXPECT_TRUE(event.query());
  side.wait(event);
}

}  // namespace
}  // namespace tandem::cuda
