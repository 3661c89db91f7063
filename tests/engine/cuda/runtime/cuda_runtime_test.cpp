// CUDA's DeviceRuntime on the fake CUDA runtime (engine/cuda/runtime/cuda_runtime.h, Note
// [Runtime apart from kernels]): runtime_for(cuda:k) is a runtime object of its own, which needs
// no kernel, no cuDNN and no cuBLAS, so it can be brought up before them.

#include <string>
#include <vector>

#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/cuda_runtime.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/device_runtime.h"
#include "engine/device_syncs.h"
#include "tests/engine/cuda/runtime/fake_cuda_fixture.h"
#include "tests/support/error_message.h"

namespace tandem::cuda {
namespace {

using fake_cuda::calls_to;
using tandem::testing::contains;
using tandem::testing::error_message;

using CudaHostRuntime = fake_cuda::FakeCudaTest;

TEST_F(CudaHostRuntime, RuntimeForACudaDeviceIsTheRuntimeObject) {
  DeviceRuntime& runtime = runtime_for(Device::cuda(1));
  EXPECT_EQ(&runtime, &cuda::runtime());
  EXPECT_EQ(&runtime, &cuda_runtime());
  EXPECT_NE(&runtime, &runtime_for(Device::cpu()));
  EXPECT_EQ(runtime.device_count(), 2);  // the fake's
  EXPECT_TRUE(cuda_available());
  EXPECT_EQ(&runtime.allocator(Device::cuda(1)), &caching_allocator(1));
  EXPECT_TRUE(contains(error_message([&] { runtime.allocator(Device::cpu()); }),
                       "[cuda] allocator asked for cpu"));
}

TEST_F(CudaHostRuntime, StreamsAndSynchronizeGoThroughTheRuntime) {
  DeviceRuntime& runtime = runtime_for(Device::cuda(0));
  const Stream side = Stream::create(0);
  StreamRef on_side;
  {
    const StreamGuard guard(side);
    on_side = runtime.current_stream(Device::cuda(0));
  }
  EXPECT_EQ(on_side.stream, static_cast<void*>(side.handle()));
  EXPECT_EQ(runtime.current_stream(Device::cuda(0)).stream, nullptr);  // the legacy default
  runtime.wait_for(on_side);  // the default stream waits for the side stream, on the device
  EXPECT_EQ(calls_to("cudaStreamWaitEvent").size(), 1u);
  EXPECT_TRUE(calls_to("cudaEventSynchronize").empty());
  const int64_t syncs = device_sync_count();
  runtime.synchronize(Device::cuda(0));
  EXPECT_EQ(calls_to("cudaDeviceSynchronize").size(), 1u);
  EXPECT_EQ(device_sync_count(), syncs + 1);  // Note [Counting device synchronisations]
}

}  // namespace
}  // namespace tandem::cuda
