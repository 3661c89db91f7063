// The CUDA runtime layer under the backend: the caching allocator, streams and events, the
// pinned host allocator, device guards, and the *_CHECK macros. Each allocator test makes its
// own CachingAllocator so that its statistics start from zero.

#include <gtest/gtest.h>

#include "tests/support/cuda_skip.h"

#if TANDEM_WITH_CUDA

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "engine/cuda/cublas_check.h"
#include "engine/cuda/cublas_library.h"
#include "engine/cuda/cudnn_check.h"
#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/cuda_check.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/pinned_allocator.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/tandem.h"
#include "tests/support/allocator_scenarios.h"
#include "tests/support/cuda_busy_wait.h"
#include "tests/support/error_message.h"
#include "tests/support/scoped_env.h"

namespace tandem::cuda {
namespace {

namespace scenarios = testing::allocator_scenarios;
using testing::error_message;

// --- the checks (no GPU needed: the libraries' message tables work without a driver)

TEST(CudaCheck, CudaErrorCarriesTheLibraryMessageTheCallAndTheLine) {
  // The call and the line, for whoever debugs (Note [Error locations] in engine/error.cpp).
  const testing::ScopedEnvironmentVariable debug("TANDEM_DEBUG", "1");
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

// The scenarios the fake runtime runs too (tests/engine/cuda/runtime/caching_allocator_test.cpp),
// at the defaults: 2000 stress steps a thread, and no checks of exact device bytes or free memory
// (a GPU is shared with the CUDA context and the libraries).
const scenarios::Runtime kGpu{};

TEST(CudaAllocatorGpu, RoundsSizesAndServesAFreedBlockAgain) {
  TANDEM_SKIP_WITHOUT_CUDA();
  scenarios::rounds_sizes_and_serves_a_freed_block_again();
}

TEST(CudaAllocatorGpu, CountsAllocatedReservedAndPeak) {
  TANDEM_SKIP_WITHOUT_CUDA();
  scenarios::counts_allocated_reserved_and_peak();
}

TEST(CudaAllocatorGpu, SplitsSegmentsAndMergesFreedNeighbours) {
  TANDEM_SKIP_WITHOUT_CUDA();
  scenarios::splits_segments_and_merges_freed_neighbours();
}

TEST(CudaAllocatorGpu, EmptyCacheGivesEveryFreeSegmentBack) {
  TANDEM_SKIP_WITHOUT_CUDA();
  scenarios::empty_cache_gives_every_free_segment_back(kGpu);
}

TEST(CudaAllocatorGpu, BlocksBelongToTheirStream) {
  TANDEM_SKIP_WITHOUT_CUDA();
  scenarios::blocks_belong_to_their_stream();
}

TEST(CudaAllocatorGpu, RecordedStreamDelaysReuseUntilItHasRun) {
  TANDEM_SKIP_WITHOUT_CUDA();
  scenarios::recorded_stream_delays_reuse_until_it_has_run();
}

TEST(CudaAllocatorGpu, ThreadsAllocateAndFreeConcurrentlyWithoutOverlap) {
  TANDEM_SKIP_WITHOUT_CUDA();
  scenarios::threads_allocate_and_free_concurrently_without_overlap(kGpu);
}

TEST(CudaAllocatorGpu, OutOfMemoryIsAClearError) {
  TANDEM_SKIP_WITHOUT_CUDA();
  scenarios::out_of_memory_is_a_clear_error(kGpu);
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
