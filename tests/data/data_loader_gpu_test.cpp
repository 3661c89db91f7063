// The DataLoader feeding a CUDA device: pinned staging, a copy stream and an event
// (Note [Uploads]). The batches must equal the host loader's, with prefetching workers, while the
// consumer's stream is kept busy so that any missing stream ordering would show.

#include <gtest/gtest.h>

#include "data/cifar10.h"
#include "data/data_loader.h"
#include "tests/support/cuda_skip.h"

#if TANDEM_WITH_CUDA
#include "engine/cuda/runtime/pinned_allocator.h"
#include "engine/cuda/runtime/stream.h"
#include "tests/support/cuda_busy_wait.h"
#endif

namespace tandem::data {
namespace {

TEST(DataLoaderGpu, DeliversTheHostLoadersBatchesToTheDevice) {
  TANDEM_SKIP_WITHOUT_CUDA();
#if TANDEM_WITH_CUDA
  const auto data = std::make_shared<const CifarDataset>(synthetic_cifar10(300, 4));
  const auto sampler = std::make_shared<RandomSampler>(300, 8);
  DataLoader on_host(std::make_shared<CifarImages>(data), sampler,
                     {.batch_size = 32, .workers = 0, .seed = 6});
  on_host.start_epoch(0);
  const int64_t pinned_before = cuda::pinned_host_allocator().stats().allocation_count;
  for (int workers : {0, 3}) {
    DataLoader loader(std::make_shared<CifarImages>(data), sampler,
                      {.batch_size = 32,
                       .workers = workers,
                       .prefetch = 4,
                       .seed = 6,
                       .device = Device::cuda(0)});
    loader.start_epoch(0);
    on_host.start_epoch(0);
    int64_t count = 0;
    while (auto batch = loader.next()) {
      // Busy consumer: the next uploads run while this stream is still behind.
      cuda::busy_wait(cuda::current_stream(0), 0, 1.0);
      const auto expected = on_host.next();
      ASSERT_TRUE(expected.has_value());
      EXPECT_EQ(batch->images.device(), Device::cuda(0));
      EXPECT_EQ(batch->images.to_vector<float>(), expected->images.to_vector<float>())
          << "batch " << count << ", " << workers << " workers";
      EXPECT_EQ(batch->labels.to_vector<int64_t>(), expected->labels.to_vector<int64_t>());
      ++count;
    }
    EXPECT_EQ(count, loader.batches_per_epoch());
  }
  EXPECT_GT(cuda::pinned_host_allocator().stats().allocation_count, pinned_before)
      << "batches were not staged in pinned memory";
#endif
}

TEST(DataLoaderGpu, StopsCleanlyWithUploadsInFlight) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const auto data = std::make_shared<const CifarDataset>(synthetic_cifar10(400, 1));
  auto loader = std::make_unique<DataLoader>(
      std::make_shared<CifarImages>(data), std::make_shared<SequentialSampler>(400),
      DataLoaderConfig{.batch_size = 50, .workers = 2, .prefetch = 4, .device = Device::cuda(0)});
  loader->start_epoch(0);
  ASSERT_TRUE(loader->next().has_value());
  loader->start_epoch(1);
  ASSERT_TRUE(loader->next().has_value());
  loader.reset();
}

}  // namespace
}  // namespace tandem::data
