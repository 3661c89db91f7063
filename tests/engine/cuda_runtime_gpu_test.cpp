// The CUDA runtime layer under the backend: the caching allocator, streams and events, the
// pinned host allocator, device guards, and the *_CHECK macros. Each allocator test makes its
// own CachingAllocator so that its statistics start from zero.

#include <gtest/gtest.h>

#include "tests/support/cuda_skip.h"

#if TANDEM_WITH_CUDA

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/cuda/cublas_library.h"
#include "engine/cuda/cudnn_check.h"
#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/cuda_check.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/pinned_allocator.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/tandem.h"
#include "tests/support/error_message.h"

namespace tandem::cuda {
namespace {

using testing::error_message;
constexpr size_t kMiB = size_t{1} << 20;

// --- the checks (no GPU needed: the libraries' message tables work without a driver)

TEST(CudaCheck, CudaErrorCarriesTheLibraryMessageTheCallAndTheLine) {
  const std::string message = error_message([] { CUDA_CHECK(cudaErrorMemoryAllocation); });
  EXPECT_NE(message.find("[cuda] CUDA error cudaErrorMemoryAllocation: out of memory"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("cudaErrorMemoryAllocation` failed"), std::string::npos) << message;
  EXPECT_NE(message.find("cuda_runtime_gpu_test.cpp:"), std::string::npos) << message;
}

TEST(CudaCheck, CublasAndCudnnErrorsNameTheirStatus) {
  const std::string cublas = error_message([] { CUBLAS_CHECK(CUBLAS_STATUS_NOT_INITIALIZED); });
  EXPECT_NE(cublas.find("[cublas] cuBLAS error CUBLAS_STATUS_NOT_INITIALIZED"), std::string::npos)
      << cublas;
  const std::string cudnn = error_message([] { CUDNN_CHECK(CUDNN_STATUS_BAD_PARAM); });
  EXPECT_NE(cudnn.find("[cudnn] cuDNN error CUDNN_STATUS_BAD_PARAM"), std::string::npos) << cudnn;
}

TEST(CudaCheck, CublasLoadsOnFirstUseWithEveryFunction) {
  // Note [Lazy cuBLAS]: the engine does not link cuBLAS; loading it needs no GPU.
  const CublasLibrary& library = cublas();
  EXPECT_NE(library.create, nullptr);
  EXPECT_NE(library.set_stream, nullptr);
  EXPECT_NE(library.set_math_mode, nullptr);
  EXPECT_NE(library.sgemm, nullptr);
  EXPECT_STREQ(library.status_name(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_EQ(&cublas(), &library);
}

TEST(CudaCheck, AvailabilityNeverThrowsAndExplainsItself) {
  // On a machine without a GPU this is the whole story; with one, the reason is empty.
  EXPECT_NO_THROW(cuda_available());
  EXPECT_EQ(cuda_available(), device_count() > 0);
  if (cuda_available()) {
    EXPECT_EQ(cuda_unavailable_reason(), "");
  } else {
    EXPECT_EQ(cuda_unavailable_reason().rfind("no CUDA device: ", 0), 0u)
        << cuda_unavailable_reason();
    const std::string message = error_message([] { zeros({2}, {.device = Device::cuda(0)}); });
    EXPECT_NE(message.find("[cuda] no CUDA device"), std::string::npos) << message;
  }
}

// --- caching allocator

TEST(CudaAllocatorGpu, RoundsSizesAndServesAFreedBlockAgain) {
  TANDEM_SKIP_WITHOUT_CUDA();
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

TEST(CudaAllocatorGpu, CountsAllocatedReservedAndPeak) {
  TANDEM_SKIP_WITHOUT_CUDA();
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

TEST(CudaAllocatorGpu, SplitsSegmentsAndMergesFreedNeighbours) {
  TANDEM_SKIP_WITHOUT_CUDA();
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

TEST(CudaAllocatorGpu, EmptyCacheGivesEveryFreeSegmentBack) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CachingAllocator allocator(0);
  void* kept = allocator.allocate(4 * kMiB);
  void* freed = allocator.allocate(30 * kMiB);
  allocator.deallocate(freed, 30 * kMiB);
  allocator.empty_cache();
  CachingAllocatorStats stats = allocator.detailed_stats();
  EXPECT_EQ(stats.reserved_bytes, static_cast<int64_t>(CachingAllocator::kMediumSegment));
  EXPECT_EQ(stats.cuda_free_count, 1);
  allocator.deallocate(kept, 4 * kMiB);
  allocator.empty_cache();
  EXPECT_EQ(allocator.detailed_stats().reserved_bytes, 0);
}

TEST(CudaAllocatorGpu, BlocksBelongToTheirStream) {
  TANDEM_SKIP_WITHOUT_CUDA();
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

TEST(CudaAllocatorGpu, RecordedStreamDelaysReuseUntilItHasRun) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CachingAllocator allocator(0);
  const Stream side = Stream::create(0);
  void* block = allocator.allocate(kMiB, nullptr);
  busy_wait(side.handle(), 0, 200.0);  // the side stream "uses" the block for 200 ms
  allocator.record_stream(block, side.handle());
  allocator.deallocate(block, kMiB);
  EXPECT_EQ(allocator.detailed_stats().pending_free_blocks, 1);
  void* while_busy = allocator.allocate(kMiB, nullptr);
  EXPECT_NE(while_busy, block) << "a block still in use on another stream was handed out";
  side.synchronize();
  allocator.deallocate(while_busy, kMiB);
  void* after = allocator.allocate(kMiB, nullptr);  // processes the completed event first
  EXPECT_EQ(allocator.detailed_stats().pending_free_blocks, 0);
  EXPECT_TRUE(after == block || after == while_busy);
  allocator.deallocate(after, kMiB);
}

TEST(CudaAllocatorGpu, ThreadsAllocateAndFreeConcurrentlyWithoutOverlap) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CachingAllocator allocator(0);
  std::mutex mutex;
  std::map<uintptr_t, uintptr_t> live;  // start → end of every block handed out, all threads
  bool overlap = false;
  auto worker = [&](unsigned seed) {
    std::mt19937 random(seed);
    std::vector<std::pair<void*, size_t>> mine;
    for (int i = 0; i < 2000; ++i) {
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

TEST(CudaAllocatorGpu, OutOfMemoryIsAClearError) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CachingAllocator allocator(0);
  const std::string message =
      error_message([&] { allocator.allocate(size_t{1} << 50); });  // a petabyte
  EXPECT_NE(message.find("[cuda allocator] out of memory on cuda:0"), std::string::npos) << message;
  // The allocator still works.
  void* ok = allocator.allocate(kMiB);
  EXPECT_NE(ok, nullptr);
  allocator.deallocate(ok, kMiB);
}

TEST(CudaAllocatorGpu, TrainingStepsAfterTheFirstNeedNoCudaMalloc) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  Generator generator(1);
  const Tensor w1 = randn({16, 3, 3, 3}, generator, {.device = gpu}).set_requires_grad(true);
  const Tensor w2 = randn({10, 16}, generator, {.device = gpu}).set_requires_grad(true);
  Tensor m1 = zeros({16, 3, 3, 3}, {.device = gpu}), m2 = zeros({10, 16}, {.device = gpu});
  const Tensor images = randn({32, 3, 16, 16}, generator, {.device = gpu});
  const Tensor labels = from_vector<int64_t>(std::vector<int64_t>(32, 3), {32},
                                             {.dtype = DType::Int64, .device = gpu});
  auto step = [&](bool first) {
    const Tensor h = relu(batch_norm2d(conv2d(images, w1, Tensor(), {.padding = 1}), Tensor(),
                                       Tensor(), Tensor(), Tensor()));
    const Tensor pooled = adaptive_avg_pool2d(max_pool2d(h, {}), 1, 1).flatten();
    cross_entropy(linear(pooled, w2), labels).backward();
    for (auto [param, buffer] : {std::pair{w1, &m1}, std::pair{w2, &m2}}) {
      Tensor p = param;
      sgd_step(p, p.grad(), *buffer, {.lr = 0.1f, .momentum = 0.9f, .first_step = first});
      p.set_grad(Tensor());
    }
  };
  CachingAllocator& allocator = caching_allocator(0);
  step(true);
  step(false);
  const int64_t misses = allocator.detailed_stats().cache_misses;
  const int64_t hits = allocator.detailed_stats().cache_hits;
  for (int i = 0; i < 3; ++i) step(false);
  EXPECT_EQ(allocator.detailed_stats().cache_misses, misses) << "cudaMalloc on the hot path";
  EXPECT_GT(allocator.detailed_stats().cache_hits, hits);
}

// --- streams and events

// N8 (Note [cuBLAS workspaces]): a GEMM on a Stream takes a cuBLAS workspace of its own on that
// stream, which goes back to the allocator when the Stream is destroyed.
TEST(CudaStreamGpu, AStreamsCublasWorkspaceIsFreedWithIt) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  Generator generator(1);
  const Tensor a = randn({64, 64}, generator, {.device = gpu});
  CachingAllocator& allocator = caching_allocator(0);
  int64_t before = 0;
  int64_t with_workspace = 0;
  {
    const Stream side = Stream::create(0);
    const StreamGuard guard(side);
    before = allocator.detailed_stats().allocated_bytes;
    matmul(a, a);  // the product is freed at once; the workspace stays
    with_workspace = allocator.detailed_stats().allocated_bytes;
    side.synchronize();
  }
  EXPECT_GT(with_workspace, before) << "no workspace for the side stream";
  EXPECT_EQ(allocator.detailed_stats().allocated_bytes, before);
}

TEST(CudaStreamGpu, DefaultIsTheLegacyStreamAndGuardsRestoreIt) {
  TANDEM_SKIP_WITHOUT_CUDA();
  EXPECT_EQ(current_stream(0), nullptr);
  const Stream side = Stream::create(0);
  {
    const StreamGuard guard(side);
    EXPECT_EQ(current_stream(0), side.handle());
    const Stream other = Stream::create(0);
    {
      const StreamGuard inner(other);
      EXPECT_EQ(current_stream(0), other.handle());
    }
    EXPECT_EQ(current_stream(0), side.handle());
  }
  EXPECT_EQ(current_stream(0), nullptr);
}

TEST(CudaStreamGpu, EventOrdersWorkAcrossStreams) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  const Stream producer = Stream::create(0);
  const Stream consumer = Stream::create(0);
  Tensor x = zeros({1 << 16}, {.device = gpu});
  x.to_vector<float>();  // x is zero on the device before the streams start
  Event produced;
  {
    const StreamGuard guard(producer);
    busy_wait(producer.handle(), 0, 100.0);
    x.fill_(1.0);
    produced.record(producer);
  }
  EXPECT_FALSE(produced.query()) << "the producer should still be busy";
  consumer.wait(produced);
  Tensor y;
  {
    const StreamGuard guard(consumer);
    y = mul(x, 2.0f);
    record_stream(x, consumer.handle());
    const std::vector<float> values = y.to_vector<float>();  // waits for the consumer stream
    EXPECT_EQ(values.front(), 2.0f);
    EXPECT_EQ(values.back(), 2.0f);
  }
  EXPECT_TRUE(produced.query());
}

TEST(CudaStreamGpu, StreamWaitStreamOrdersWithoutBlockingTheHost) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const Stream a = Stream::create(0);
  const Stream b = Stream::create(0);
  busy_wait(a.handle(), 0, 100.0);
  const auto start = std::chrono::steady_clock::now();
  stream_wait_stream(b.handle(), 0, a.handle(), 0);
  const double waited_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(waited_ms, 50.0) << "the host blocked";
  EXPECT_FALSE(b.query()) << "b should wait for a's busy kernel";
  b.synchronize();
  EXPECT_TRUE(a.query());
}

TEST(CudaStreamGpu, TimedEventsMeasureTheGap) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const Stream stream = Stream::create(0);
  Event start(true), end(true);
  start.record(stream);
  busy_wait(stream.handle(), 0, 20.0);
  end.record(stream);
  end.synchronize();
  EXPECT_GE(start.elapsed_ms(end), 18.0f);
  EXPECT_LT(start.elapsed_ms(end), 2000.0f);
}

TEST(CudaStreamGpu, CopyToHostWaitsForQueuedWork) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  Tensor x = zeros({1000}, {.device = gpu});
  busy_wait(current_stream(0), 0, 50.0);
  x.fill_(3.0);
  EXPECT_EQ(x.to_vector<float>(), std::vector<float>(1000, 3.0f));
}

TEST(CudaStreamGpu, DeviceGuardRestoresTheCurrentDevice) {
  TANDEM_SKIP_WITHOUT_CUDA();
  set_device(0);  // a guard restores only a device with a context (Note [Device contexts])
  EXPECT_TRUE(has_context(0)) << "cuDevicePrimaryCtxGetState through the runtime";
  const int before = current_device();
  {
    const DeviceGuard guard(device_count() - 1);
    EXPECT_EQ(current_device(), device_count() - 1);
  }
  EXPECT_EQ(current_device(), before);
  const std::string message = error_message([] { DeviceGuard guard(device_count()); });
  EXPECT_NE(message.find("does not exist"), std::string::npos) << message;
}

// --- pinned host memory

TEST(CudaPinnedGpu, PinnedTensorsCopyBothWaysAndAreReusedAfterTheirCopies) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  void* first_block = nullptr;
  {
    Tensor staging = empty_pinned({4096});
    first_block = staging.storage()->data();
    std::vector<float> values(4096);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
    std::memcpy(staging.data_ptr(), values.data(), values.size() * sizeof(float));
    busy_wait(current_stream(0), 0, 100.0);
    const Tensor on_device = staging.to(gpu);  // asynchronous: queued behind the busy kernel
    staging = Tensor();                        // freed while the copy is still queued
    Tensor reused = empty_pinned({4096});
    EXPECT_NE(reused.storage()->data(), first_block) << "pinned block reused before its copy ran";
    EXPECT_EQ(on_device.to_vector<float>(), values);
  }
  // The copy has run, so both blocks are free again: two more tensors need no cudaHostAlloc.
  const int64_t reserved = pinned_host_allocator().stats().reserved_bytes;
  const Tensor again_1 = empty_pinned({4096});
  const Tensor again_2 = empty_pinned({4096});
  EXPECT_EQ(pinned_host_allocator().stats().reserved_bytes, reserved);
  EXPECT_TRUE(again_1.storage()->data() == first_block || again_2.storage()->data() == first_block);
}

}  // namespace
}  // namespace tandem::cuda

#else  // built without CUDA: the GPU suites say so instead of vanishing

TEST(CudaAllocatorGpu, NeedsCuda) {
  TANDEM_SKIP_WITHOUT_CUDA();
}
TEST(CudaStreamGpu, NeedsCuda) {
  TANDEM_SKIP_WITHOUT_CUDA();
}
TEST(CudaPinnedGpu, NeedsCuda) {
  TANDEM_SKIP_WITHOUT_CUDA();
}

#endif
