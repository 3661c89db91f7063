// DeviceRuntime::current_stream() / wait_for(): how code above the engine (the Reducer) orders
// work that one thread queues and another uses, without knowing whether the device is a CPU or a
// GPU.

#include <gtest/gtest.h>

#include "engine/device_runtime.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/factory.h"
#include "tests/support/cuda_skip.h"

#if TANDEM_WITH_CUDA
#include "engine/cuda/runtime/stream.h"
#include "tests/support/cuda_busy_wait.h"
#endif

namespace tandem {
namespace {

TEST(RuntimeStreams, TheCpuHasNoStreamsAndWaitsForNothing) {
  DeviceRuntime& cpu = runtime_for(Device::cpu(1));
  const StreamRef stream = cpu.current_stream(Device::cpu(1));
  EXPECT_EQ(stream.device, Device::cpu(1));
  EXPECT_EQ(stream.stream, nullptr);
  Tensor x = zeros({4}, {.device = Device::cpu(1)});
  cpu.wait_for(stream);  // returns at once: CPU work is done when its call returns
  x.fill_(3.0);
  EXPECT_EQ(x.to_vector<float>(), std::vector<float>(4, 3.0f));
}

#if TANDEM_WITH_CUDA

TEST(RuntimeStreamsGpu, CurrentStreamFollowsTheGuardAndWaitForOrdersTheConsumer) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  DeviceRuntime& runtime = runtime_for(gpu);
  const cuda::Stream producer = cuda::Stream::create(0);
  Tensor x = zeros({1 << 16}, {.device = gpu});
  x.to_vector<float>();  // x is zero on the device before the producer starts
  StreamRef produced;
  {
    const cuda::StreamGuard guard(producer);
    produced = runtime.current_stream(gpu);
    EXPECT_EQ(produced.stream, static_cast<void*>(producer.handle()));
    cuda::busy_wait(producer.handle(), 0, 100.0);
    x.fill_(1.0);
  }
  EXPECT_EQ(runtime.current_stream(gpu).stream, nullptr) << "the legacy default stream again";
  runtime.wait_for(produced);
  const Tensor y = mul(x, 2.0f);  // on the default stream, behind the producer's fill
  const std::vector<float> values = y.to_vector<float>();
  EXPECT_EQ(values.front(), 2.0f);
  EXPECT_EQ(values.back(), 2.0f);
}

#else

TEST(RuntimeStreamsGpu, NeedsCuda) {
  TANDEM_SKIP_WITHOUT_CUDA();
}

#endif

}  // namespace
}  // namespace tandem
