// Training steps read nothing on the host (Note [Counting host reads]): on a GPU every read
// waits for the queue to drain. Data-parallel modes: tests/parallel.

#include <gtest/gtest.h>

#include "engine/tandem.h"
#include "nn/batch_norm2d.h"
#include "nn/resnet.h"
#include "nn/sync_batch_norm.h"
#include "tests/support/cuda_skip.h"
#include "tests/support/host_reads.h"
#include "tests/support/one_rank_reducer.h"

namespace tandem::nn {
namespace {

using testing::host_reads_during;
using testing::random_image_batch;
using testing::train_steps;

TEST(HostReads, ReadingATensorCountsOnce) {
  const Tensor x = ones({3});
  EXPECT_EQ(host_reads_during([&] { (void)sum(x).item(); }), 1);
  EXPECT_EQ(host_reads_during([&] { (void)x.to_vector<float>(); }), 1);
  EXPECT_EQ(host_reads_during([&] { (void)mul(x, 2.0f); }), 0);
}

TEST(HostReads, ResNet20TrainingStepsReadNothing) {
  for (const MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
    Generator init(3);
    auto model = make_resnet("resnet20", init);
    model->to(format);
    testing::ImageBatch batch = random_image_batch(4, 5);
    batch.images = batch.images.contiguous(format);
    EXPECT_EQ(host_reads_during([&] { train_steps(*model, batch, 3); }), 0)
        << memory_format_name(format);
    // The counter moved on the device: PyTorch's num_batches_tracked after 3 steps.
    EXPECT_EQ(model->named_buffers()[2].first, "bn1.num_batches_tracked");
    EXPECT_EQ(model->named_buffers()[2].second.item(), 3.0);
  }
}

// The same steps on a GPU, where the count is of real device→host copies: the CUDA backend's
// kernels (the loss's label check, say) must not copy to the host either.
TEST(HostReadsGpu, ResNet20TrainingStepsCopyNothingToTheHost) {
  TANDEM_SKIP_WITHOUT_CUDA();
  Generator init(3);
  auto model = make_resnet("resnet20", init);
  model->to(Device::cuda(0));
  testing::ImageBatch batch = random_image_batch(8, 5);
  batch = {batch.images.to(Device::cuda(0)), batch.labels.to(Device::cuda(0))};
  train_steps(*model, batch, 1);  // the first step's cuDNN searches are not steps
  EXPECT_EQ(host_reads_during([&] { train_steps(*model, batch, 3); }), 0);
  EXPECT_EQ(host_reads_during([&] { (void)model->named_buffers()[2].second.item(); }), 1);
}

// Hands `reducer` to every batch norm below `module`; returns how many.
int synchronise_batch_norms(Module& module, const std::shared_ptr<StatisticsReducer>& reducer) {
  int count = 0;
  if (auto* bn = dynamic_cast<BatchNorm2d*>(&module)) {
    bn->set_statistics_reducer(reducer);
    ++count;
  }
  for (const auto& [name, child] : module.children())
    count += synchronise_batch_norms(*child, reducer);
  return count;
}

TEST(HostReads, SyncBatchNormTrainingStepsReadNothing) {
  Generator init(3);
  auto model = make_resnet("resnet20", init);
  ASSERT_EQ(synchronise_batch_norms(*model, std::make_shared<testing::OneRankReducer>()), 21);
  const testing::ImageBatch batch = random_image_batch(4, 5);
  EXPECT_EQ(host_reads_during([&] { train_steps(*model, batch, 2); }), 0);
}

}  // namespace
}  // namespace tandem::nn
