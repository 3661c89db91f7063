// The host queues training steps without waiting for the GPU (review 2026-11-27, §3). Counting
// device-to-host copies (HostReadsGpu in host_reads_test.cpp) misses the other ways a host can
// wait: a cudaFree, a cudaHostAlloc of pinned memory, a stream or device synchronisation inside
// some op. Here the GPU is kept busy for 500 ms by a spinning kernel, and a ResNet-20 training
// step queued behind it must return long before it ends: a hidden wait anywhere in a step makes
// the host wait for the spin too. Three times, one step behind each spin (review H6): a step is
// 250-300 launches, and three behind one spin came near the driver's pending-launch queue
// (about a thousand, undocumented), where cudaLaunchKernel itself blocks until the spin ends and
// the test would blame a wait that is not there.

#include <gtest/gtest.h>

#include <chrono>

#include "engine/elapsed.h"
#include "engine/tandem.h"
#include "nn/resnet.h"
#include "nn/sgd.h"
#include "tests/support/cuda_skip.h"
#include "tests/support/image_batch.h"

#if TANDEM_WITH_CUDA
#include "engine/cuda/runtime/stream.h"
#include "tests/support/cuda_busy_wait.h"
#endif

namespace tandem::nn {
namespace {

using Clock = std::chrono::steady_clock;

TEST(HostNeverWaitsGpu, ResNet20StepsQueueBehindABusyDevice) {
  TANDEM_SKIP_WITHOUT_CUDA();
#if TANDEM_WITH_CUDA
  const Device gpu = Device::cuda(0);
  Generator init(3);
  auto model = make_resnet("resnet20", init);
  model->to(gpu);
  model->train();
  const testing::ImageBatch batch = testing::random_image_batch(32, 5);
  const Tensor images = batch.images.to(gpu), labels = batch.labels.to(gpu);
  Sgd sgd(model->parameters(), {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f});
  const auto step = [&] {
    sgd.zero_grad();
    cross_entropy(model->forward(images), labels).backward();
    sgd.step();
  };
  step();  // the first step searches cuDNN's algorithms, loads cuBLAS and fills the caches
  runtime_for(gpu).synchronize(gpu);

  for (int i = 0; i < 3; ++i) {
    cuda::busy_wait(cuda::current_stream(gpu.index), gpu.index, 500.0);
    const Clock::time_point start = Clock::now();
    step();
    const double queued_ms = milliseconds_since(start);
    runtime_for(gpu).synchronize(gpu);
    const double done_ms = milliseconds_since(start);
    EXPECT_LT(queued_ms, 200.0) << "step " << i + 2 << ": the host waited for the device";
    // The spin really held the device: without it the test could not fail.
    EXPECT_GE(done_ms, 400.0) << "step " << i + 2 << ": the busy kernel did not keep it busy";
  }
#endif
}

}  // namespace
}  // namespace tandem::nn
