// The fake CUDA runtime itself (tests/support/fake_cuda): what the other cuda_host tests rely on.

#include <set>

#include "tests/engine/cuda/runtime/fake_cuda_fixture.h"

namespace tandem::fake_cuda {
namespace {

using CudaHostFake = FakeCudaTest;

TEST_F(CudaHostFake, EventsCompleteWhenTheirStreamHasRun) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, 0), cudaSuccess);
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), cudaSuccess);
  launch(stream);
  ASSERT_EQ(cudaEventRecord(event, stream), cudaSuccess);
  launch(stream);
  EXPECT_EQ(cudaEventQuery(event), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "cudaGetLastError clears";
  EXPECT_EQ(cudaEventSynchronize(event), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(event), cudaSuccess);
  EXPECT_EQ(queued(stream, 0), 1) << "only the work up to the event ran";
  run(stream, 0);
  EXPECT_EQ(cudaStreamQuery(stream), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST_F(CudaHostFake, AWaitingStreamRunsWhatItWaitsFor) {
  cudaStream_t producer = nullptr, consumer = nullptr;
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaStreamCreateWithPriority(&producer, cudaStreamNonBlocking, 0), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithPriority(&consumer, cudaStreamNonBlocking, 0), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), cudaSuccess);
  launch(producer);
  ASSERT_EQ(cudaEventRecord(event, producer), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(consumer, event, 0), cudaSuccess);
  launch(producer);  // after the record: not waited for
  run(consumer, 0);
  EXPECT_EQ(queued(producer, 0), 1);
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(consumer), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(producer), cudaSuccess);
}

TEST_F(CudaHostFake, ContextsComeFromSetDeviceAndFromWorkOnTheCurrentDevice) {
  int device = -1;
  EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 0);
  EXPECT_EQ(devices_with_context(), std::set<int>{});
  EXPECT_EQ(cudaSetDevice(1), cudaSuccess);
  EXPECT_EQ(devices_with_context(), std::set<int>{1});
  void* ptr = nullptr;
  EXPECT_EQ(cudaMalloc(&ptr, 1024), cudaSuccess);
  EXPECT_EQ(device_bytes_in_use(1), 1024);
  EXPECT_EQ(cudaFree(ptr), cudaSuccess);
  EXPECT_EQ(devices_with_context(), std::set<int>{1});
  EXPECT_EQ(cudaSetDevice(2), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
}

TEST_F(CudaHostFake, RecordsRuleBreaksAndScriptedErrors) {
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), cudaSuccess);  // cuda:0
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(event, nullptr), cudaErrorInvalidResourceHandle);  // cuda:1's stream
  ASSERT_EQ(violations().size(), 1u);
  EXPECT_EQ(violations()[0], "cudaEventRecord: E" + details_of("cudaEventRecord")[0].substr(1));
  fail_next("cudaEventDestroy", cudaErrorLaunchFailure);
  EXPECT_EQ(cudaEventDestroy(event), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  reset();  // the test's one violation was deliberate
}

TEST_F(CudaHostFake, MemoryHasABudgetAndFreeingWithQueuedWorkIsReported) {
  reset({.memory_bytes = 4096});
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 4096), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&b, 1), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  launch(nullptr);
  EXPECT_EQ(cudaFree(a), cudaSuccess);
  EXPECT_EQ(violations(),
            std::vector<std::string>{"cudaFree on cuda:0 while work is still queued there"});
  reset();
}

}  // namespace
}  // namespace tandem::fake_cuda
