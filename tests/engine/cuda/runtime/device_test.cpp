// Devices on the fake CUDA runtime (engine/cuda/runtime/device.h): which contexts guards create
// (Note [Device contexts]), errors they ignore and clear, peer access, and what a machine without a
// usable GPU is told.

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/pinned_allocator.h"
#include "engine/cuda/runtime/stream.h"
#include "tests/engine/cuda/runtime/fake_cuda_fixture.h"
#include "tests/support/cuda_busy_wait.h"
#include "tests/support/cuda_skip.h"

namespace tandem::cuda {
namespace {

using fake_cuda::details_of;
using fake_cuda::devices_with_context;

using CudaHostDevice = fake_cuda::FakeCudaTest;

// Runs `fn` on a new thread, whose current device is 0 and has never been set.
template <typename Fn>
void on_new_thread(const Fn& fn) {
  std::thread thread(fn);
  thread.join();
}

TEST_F(CudaHostDevice, GuardsOnANewThreadMakeNoContextOnDeviceZero) {
  on_new_thread([] {
    { const DeviceGuard guard(1); }
    { const DeviceGuard guard(1); }
    EXPECT_EQ(current_device(), 1) << "device 0 has no context: the thread stays on 1";
  });
  EXPECT_EQ(devices_with_context(), std::set<int>{1});
  EXPECT_EQ(details_of("cudaSetDevice"), std::vector<std::string>{"1"});
}

TEST_F(CudaHostDevice, GuardsRestoreADeviceThatHasAContext) {
  set_device(0);
  {
    const DeviceGuard guard(1);
    EXPECT_EQ(current_device(), 1);
  }
  EXPECT_EQ(current_device(), 0);
  EXPECT_EQ(details_of("cudaSetDevice"), (std::vector<std::string>{"0", "1", "0"}));
}

// Under EXCLUSIVE_PROCESS compute mode another process holds GPU 0: a guard that switched back
// to it would fail, and the failure would surface at the next kernel launch.
TEST_F(CudaHostDevice, ARankOnGpuOneRunsWhereGpuZeroBelongsToAnotherProcess) {
  fake_cuda::reset({.busy_devices = {0}});
  on_new_thread([] {
    { const DeviceGuard guard(1); }
    EXPECT_NO_THROW(busy_wait(nullptr, 1, 1.0));
  });
  EXPECT_EQ(devices_with_context(), std::set<int>{1});
}

// The invariant of Note [Device contexts] over the trace: a DDP rank working on GPU 1 (its
// allocator, streams, stream waits, pinned staging memory and cross-stream frees) makes GPU 1
// current and never any other GPU.
TEST_F(CudaHostDevice, ARankOnGpuOneNeverMakesAnotherDeviceCurrent) {
  on_new_thread([] {
    CachingAllocator allocator(1);
    PinnedHostAllocator pinned;
    const Stream side = Stream::create(1);
    void* block = allocator.allocate(1 << 20, nullptr);
    stream_wait_stream(side.handle(), 1, nullptr, 1);
    busy_wait(side.handle(), 1, 1.0);
    allocator.record_stream(block, side.handle());
    allocator.deallocate(block, 1 << 20);
    void* staging = nullptr;
    {
      const DeviceGuard guard(1);  // as CudaUploadStream::empty_host does
      staging = pinned.allocate(4096);
    }
    pinned.record_stream(staging, side.handle(), 1);
    pinned.deallocate(staging, 4096);
    side.synchronize();
    allocator.empty_cache();
    pinned.empty_cache();
  });
  EXPECT_EQ(devices_with_context(), std::set<int>{1});
  const std::set<std::string> need_no_context = {"cudaDriverGetVersion",
                                                 "cudaGetDeviceCount",
                                                 "cudaGetDevice",
                                                 "cudaSetDevice",
                                                 "cudaGetDriverEntryPointByVersion",
                                                 "cuDevicePrimaryCtxGetState"};
  for (const fake_cuda::Call& call : fake_cuda::calls()) {
    if (call.function == "cudaSetDevice") {
      EXPECT_EQ(call.detail, "1");
    }
    if (need_no_context.count(call.function) == 0) {
      EXPECT_EQ(call.device, 1) << call.function << "(" << call.detail
                                << ") ran on cuda:" << call.device;
    }
  }
}

TEST_F(CudaHostDevice, AFailedSwitchBackIsClearedNotBlamedOnTheNextKernel) {
  set_device(0);
  {
    const DeviceGuard guard(1);
    fake_cuda::fail_next("cudaSetDevice", cudaErrorDevicesUnavailable);
  }
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  EXPECT_NO_THROW(busy_wait(nullptr, 1, 1.0));
}

TEST_F(CudaHostDevice, AQuietGuardThatCannotSwitchStaysAndClearsTheError) {
  fake_cuda::fail_next("cudaSetDevice", cudaErrorDevicesUnavailable);
  const QuietDeviceGuard guard(1);
  EXPECT_FALSE(guard.active());
  EXPECT_EQ(current_device(), 0);
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
}

TEST_F(CudaHostDevice, PeerAccessIsEnabledOncePerOrderedPair) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 3; ++i) EXPECT_TRUE(enable_peer_access(1, 0));
    });
  }
  for (auto& thread : threads) thread.join();
  // Once per process: none at all when an earlier run in this process enabled it already.
  const std::vector<fake_cuda::Call> enabled = fake_cuda::calls_to("cudaDeviceEnablePeerAccess");
  EXPECT_LE(enabled.size(), 1u);
  for (const fake_cuda::Call& call : enabled) {
    EXPECT_EQ(call.device, 1);
    EXPECT_EQ(call.detail, "0");
  }
  EXPECT_TRUE(enable_peer_access(0, 0)) << "a device reaches its own memory";
}

TEST_F(CudaHostDevice, PeerAccessEnabledByOtherCodeIsNoError) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
  EXPECT_TRUE(enable_peer_access(0, 1));
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
}

// --- what a machine without a usable GPU is told (Note [Fail, don't skip])

TEST_F(CudaHostDevice, ADriverTooOldForThisBuildIsUnusableNotAbsent) {
  fake_cuda::reset({.driver_version = 12020, .device_count_error = cudaErrorInsufficientDriver});
  const detail::DeviceProbe probe = detail::probe_devices();
  EXPECT_EQ(probe.count, 0);
  EXPECT_EQ(probe.reason.rfind("CUDA is unusable: ", 0), 0u) << probe.reason;
  EXPECT_NE(probe.reason.find("supports CUDA up to 12.2"), std::string::npos) << probe.reason;
  EXPECT_NE(probe.reason.find("this build uses CUDA 13.0, which needs driver R580 or newer"),
            std::string::npos)
      << probe.reason;
  EXPECT_EQ(probe.reason.find('\n'), std::string::npos) << "one line";
}

TEST_F(CudaHostDevice, NoDriverAndNoDeviceMeanNoDevice) {
  fake_cuda::reset({.driver_version = 0});
  EXPECT_EQ(detail::probe_devices().reason,
            "no CUDA device: no NVIDIA driver is installed (libcuda.so not found)");
  fake_cuda::reset({.device_count_error = cudaErrorNoDevice});
  EXPECT_EQ(detail::probe_devices().reason.rfind("no CUDA device: ", 0), 0u);
  fake_cuda::reset({.device_count = 0});
  EXPECT_EQ(detail::probe_devices().reason, "no CUDA device: the driver reports 0 devices");
  fake_cuda::reset();
  EXPECT_EQ(detail::probe_devices().count, 2);
  EXPECT_EQ(detail::probe_devices().reason, "");
}

TEST(CudaHostDeviceReason, NamesTheDriverReleaseAndAnyOtherFailure) {
  EXPECT_EQ(detail::unavailable_reason(12020, cudaErrorInsufficientDriver, "535.104.05")
                .rfind("CUDA is unusable: NVIDIA driver 535.104.05 supports CUDA up to 12.2, ", 0),
            0u);
  const std::string other = detail::unavailable_reason(13000, cudaErrorInitializationError, "");
  EXPECT_EQ(other.rfind("CUDA is unusable: cudaErrorInitializationError: ", 0), 0u) << other;
  EXPECT_NE(other.find("(the NVIDIA driver, supporting CUDA up to 13.0)"), std::string::npos)
      << other;
}

TEST(CudaHostDeviceReason, ReadsTheDriverReleaseFromProc) {
  EXPECT_EQ(detail::driver_release("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  "
                                   "Sat Aug 19 01:15:15 UTC 2023\nGCC version:  gcc 12.2.0\n"),
            "535.104.05");
  EXPECT_EQ(detail::driver_release("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
                                   "580.65.06  Release Build  (dvs-builder@U16)\n"),
            "580.65.06");
  EXPECT_EQ(detail::driver_release(""), "");
}

// What TANDEM_SKIP_WITHOUT_CUDA() asks nvidia-smi (Note [Fail, don't skip]).
TEST(CudaHostDeviceReason, GpusAreCountedFromNvidiaSmiOutput) {
  EXPECT_TRUE(testing::lists_gpus("printf 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1a)\\n'"));
  EXPECT_TRUE(testing::lists_gpus("printf 'a warning\\nGPU 1: NVIDIA A100 (UUID: GPU-2b)\\n'"));
  EXPECT_FALSE(testing::lists_gpus("printf 'No devices were found\\n'"));
  EXPECT_FALSE(testing::lists_gpus("exit 9"));
}

}  // namespace
}  // namespace tandem::cuda
