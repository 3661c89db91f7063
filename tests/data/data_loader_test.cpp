#include <gtest/gtest.h>

#include "data/data_loader.h"

#include "data/cifar10.h"

namespace tandem::data {
namespace {

std::shared_ptr<const CifarDataset> synthetic(int64_t n) {
  return std::make_shared<const CifarDataset>(synthetic_cifar10(n, 1));
}

// The images as the loader sees them: through the transforms (by default the training ones).
std::shared_ptr<const Dataset> images(std::shared_ptr<const CifarDataset> data,
                                      TransformOptions transform = {}) {
  return std::make_shared<const CifarImages>(std::move(data), transform);
}

std::vector<Batch> whole_epoch(DataLoader& loader, int64_t epoch) {
  loader.start_epoch(epoch);
  std::vector<Batch> batches;
  while (auto batch = loader.next()) batches.push_back(std::move(*batch));
  return batches;
}

// A sampler that hands out an index outside the data set, to make a worker fail.
class BrokenSampler final : public Sampler {
 public:
  std::vector<int64_t> indices(int64_t) const override { return {0, 1, 2, 3, 999}; }
  int64_t size() const override { return 5; }
};

TEST(DataLoader, DeliversTheSamplersOrderInBatches) {
  const auto data = synthetic(10);
  const auto sampler = std::make_shared<RandomSampler>(10, 4);
  DataLoader loader(images(data, eval_transform()), sampler, {.batch_size = 4, .workers = 2});
  EXPECT_EQ(loader.batches_per_epoch(), 3);
  const auto batches = whole_epoch(loader, 2);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[2].labels.size(0), 2);  // the short last batch is kept
  std::vector<int64_t> labels;
  for (const Batch& batch : batches) {
    for (int64_t label : batch.labels.to_vector<int64_t>()) labels.push_back(label);
  }
  const auto all_labels = data->labels.to_vector<int64_t>();
  std::vector<int64_t> expected;
  for (int64_t index : sampler->indices(2))
    expected.push_back(all_labels[static_cast<size_t>(index)]);
  EXPECT_EQ(labels, expected);
}

// Note [Augmentation per image]: two DDP ranks (DistributedSampler, half the batch each) see
// the very images, augmented alike, that one process sees in its batch of the same number:
// rank r holds positions r, r + 2, … of the global batch.
TEST(DataLoader, DdpRanksTogetherSeeTheSingleProcessBatchAugmentedAlike) {
  const auto data = synthetic(40);
  const DataLoaderConfig single_config{.batch_size = 8, .workers = 2, .seed = 5};
  DataLoader single(images(data), std::make_shared<RandomSampler>(40, 9), single_config);
  const auto global = whole_epoch(single, 3);
  for (int64_t rank : {0, 1}) {
    DataLoaderConfig config = single_config;
    config.batch_size = 4;
    DataLoader shard(images(data),
                     std::make_shared<DistributedSampler>(
                         40, DistributedSamplerConfig{.num_replicas = 2, .rank = rank, .seed = 9}),
                     config);
    const auto local = whole_epoch(shard, 3);
    ASSERT_EQ(local.size(), global.size());
    for (size_t k = 0; k < local.size(); ++k) {
      for (int64_t j = 0; j < 4; ++j) {
        const Tensor mine = local[k].images.slice(j, j + 1).contiguous();
        const Tensor theirs = global[k].images.slice(2 * j + rank, 2 * j + rank + 1).contiguous();
        EXPECT_EQ(mine.to_vector<float>(), theirs.to_vector<float>())
            << "batch " << k << ", rank " << rank << ", image " << j;
      }
    }
  }
  // And the augmentation does vary from epoch to epoch, for the same images in the same order.
  DataLoader in_order(images(data), std::make_shared<SequentialSampler>(40), single_config);
  const auto epoch3 = whole_epoch(in_order, 3);
  const auto epoch4 = whole_epoch(in_order, 4);
  bool differs = false;
  for (size_t k = 0; k < epoch3.size(); ++k) {
    differs = differs || epoch3[k].images.to_vector<float>() != epoch4[k].images.to_vector<float>();
  }
  EXPECT_TRUE(differs);
}

TEST(DataLoader, DropLastDropsTheShortBatch) {
  DataLoader loader(images(synthetic(10)), std::make_shared<SequentialSampler>(10),
                    {.batch_size = 4, .workers = 1, .drop_last = true});
  EXPECT_EQ(whole_epoch(loader, 0).size(), 2u);
}

TEST(DataLoader, SameBatchesForAnyNumberOfWorkers) {
  // Note [Loader determinism]: augmentation included.
  const auto data = synthetic(40);
  const auto sampler = std::make_shared<RandomSampler>(40, 9);
  std::vector<std::vector<float>> reference;
  for (int workers : {0, 1, 3}) {
    DataLoader loader(images(data), sampler,
                      {.batch_size = 8, .workers = workers, .prefetch = 2, .seed = 5});
    std::vector<std::vector<float>> images;
    for (const Batch& batch : whole_epoch(loader, 1))
      images.push_back(batch.images.to_vector<float>());
    if (reference.empty()) {
      reference = images;
    } else {
      EXPECT_EQ(images, reference) << workers << " workers";
    }
  }
  DataLoader other_epoch(images(data), sampler, {.batch_size = 8, .workers = 2, .seed = 5});
  EXPECT_NE(whole_epoch(other_epoch, 2)[0].images.to_vector<float>(), reference[0]);
}

// A resume in the middle of an epoch (Note [Mid-epoch checkpoints]) gets the very batches, in
// order and augmented alike, that the whole epoch has from that batch on, for any workers.
TEST(DataLoader, StartingAtABatchGivesTheRestOfTheWholeEpoch) {
  const auto data = synthetic(40);
  const auto sampler = std::make_shared<RandomSampler>(40, 9);
  DataLoader whole(images(data), sampler, {.batch_size = 6, .workers = 2, .seed = 5});
  const auto reference = whole_epoch(whole, 3);
  ASSERT_EQ(reference.size(), 7u);
  for (int workers : {0, 2}) {
    DataLoader resumed(images(data), sampler, {.batch_size = 6, .workers = workers, .seed = 5});
    resumed.start_epoch(3, 4);
    for (size_t k = 4; k < reference.size(); ++k) {
      const std::optional<Batch> batch = resumed.next();
      ASSERT_TRUE(batch.has_value()) << "batch " << k;
      EXPECT_EQ(batch->images.to_vector<float>(), reference[k].images.to_vector<float>()) << k;
      EXPECT_EQ(batch->labels.to_vector<int64_t>(), reference[k].labels.to_vector<int64_t>());
    }
    EXPECT_FALSE(resumed.next().has_value());
    resumed.start_epoch(3, 7);  // at the end: nothing left
    EXPECT_FALSE(resumed.next().has_value());
  }
  EXPECT_THROW(whole.start_epoch(0, 8), Error);
  EXPECT_THROW(whole.start_epoch(0, -1), Error);
}

TEST(DataLoader, StopsCleanlyMidEpochAndRestarts) {
  const auto data = synthetic(200);
  auto loader =
      std::make_unique<DataLoader>(images(data), std::make_shared<SequentialSampler>(200),
                                   DataLoaderConfig{.batch_size = 10, .workers = 2, .prefetch = 3});
  loader->start_epoch(0);
  ASSERT_TRUE(loader->next().has_value());
  loader->start_epoch(1);  // abandon epoch 0 halfway
  EXPECT_EQ(whole_epoch(*loader, 1).size(), 20u);
  loader->start_epoch(2);
  ASSERT_TRUE(loader->next().has_value());
  loader.reset();  // destroyed with batches in flight: must not hang
}

TEST(DataLoader, WorkerErrorsReachTheConsumer) {
  DataLoader loader(images(synthetic(10)), std::make_shared<BrokenSampler>(),
                    {.batch_size = 2, .workers = 2});
  loader.start_epoch(0);
  ASSERT_TRUE(loader.next().has_value());
  ASSERT_TRUE(loader.next().has_value());
  try {
    loader.next();
    FAIL() << "expected the worker's error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[make_batch] index 999"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      DataLoader(images(synthetic(4)), std::make_shared<SequentialSampler>(4), {.batch_size = 0}),
      Error);
}

TEST(DataLoader, DeliversToTheRequestedDeviceTheSameBatches) {
  // Another CPU device goes through an UploadStream (Note [Uploads]), as a CUDA device does.
  const auto data = synthetic(20);
  const auto sampler = std::make_shared<RandomSampler>(20, 3);
  DataLoader on_host(images(data), sampler, {.batch_size = 8, .workers = 0, .seed = 2});
  const auto reference = whole_epoch(on_host, 1);
  for (int workers : {0, 2}) {
    DataLoader loader(images(data), sampler,
                      {.batch_size = 8, .workers = workers, .seed = 2, .device = Device::cpu(1)});
    const auto batches = whole_epoch(loader, 1);
    ASSERT_EQ(batches.size(), reference.size());
    for (size_t b = 0; b < batches.size(); ++b) {
      EXPECT_EQ(batches[b].images.device(), Device::cpu(1));
      EXPECT_EQ(batches[b].labels.device(), Device::cpu(1));
      EXPECT_EQ(batches[b].images.to_vector<float>(), reference[b].images.to_vector<float>());
      EXPECT_EQ(batches[b].labels.to_vector<int64_t>(), reference[b].labels.to_vector<int64_t>());
    }
  }
}

}  // namespace
}  // namespace tandem::data
