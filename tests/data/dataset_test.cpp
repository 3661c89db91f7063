#include <gtest/gtest.h>

#include "data/data_loader.h"
#include "engine/tandem.h"

namespace tandem::data {
namespace {

// A data set of one's own, as docs/library.md writes one: example i is the vector (i, 2i) with
// noise drawn from the loader's generator, target i mod 3.
class Pairs final : public Dataset {
 public:
  explicit Pairs(int64_t size) : size_(size) {}
  int64_t size() const override { return size_; }
  Example get(int64_t index, Generator& generator) const override {
    const auto noise = static_cast<float>(generator.next_u64() % 1000) / 1e6f;
    const auto x = static_cast<float>(index);
    return {from_vector<float>({x + noise, 2 * x}, {2}), from_vector<int64_t>({index % 3}, {})};
  }

 private:
  int64_t size_;
};

// Its examples change shape at index 5: a batch cannot stack them.
class Ragged final : public Dataset {
 public:
  int64_t size() const override { return 8; }
  Example get(int64_t index, Generator&) const override {
    return {zeros({index < 5 ? 2 : 3}), from_vector<int64_t>({0}, {})};
  }
};

std::vector<Batch> whole_epoch(DataLoader& loader, int64_t epoch) {
  loader.start_epoch(epoch);
  std::vector<Batch> batches;
  while (auto batch = loader.next()) batches.push_back(std::move(*batch));
  return batches;
}

TEST(Dataset, LoaderStacksADataSetOfOnesOwnInTheSamplersOrder) {
  const auto pairs = std::make_shared<Pairs>(10);
  const auto sampler = std::make_shared<RandomSampler>(10, 5);
  DataLoader loader(pairs, sampler, {.batch_size = 4, .workers = 2});
  const auto batches = whole_epoch(loader, 1);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].images.shape(), (Shape{4, 2}));
  EXPECT_EQ(batches[0].labels.shape(), (Shape{4}));
  EXPECT_EQ(batches[2].images.shape(), (Shape{2, 2}));
  const std::vector<int64_t> order = sampler->indices(1);
  for (size_t b = 0; b < batches.size(); ++b) {
    const auto inputs = batches[b].images.to_vector<float>();
    const auto targets = batches[b].labels.to_vector<int64_t>();
    for (size_t row = 0; row < targets.size(); ++row) {
      const int64_t index = order[4 * b + row];
      EXPECT_NEAR(inputs[2 * row], static_cast<float>(index), 1e-3f);
      EXPECT_EQ(inputs[2 * row + 1], static_cast<float>(2 * index));
      EXPECT_EQ(targets[row], index % 3);
    }
  }
}

TEST(Dataset, ADataSetOfOnesOwnIsTheSameForAnyNumberOfWorkers) {
  const auto pairs = std::make_shared<Pairs>(12);
  const auto sampler = std::make_shared<RandomSampler>(12, 2);
  DataLoader alone(pairs, sampler, {.batch_size = 5, .workers = 0, .seed = 4});
  DataLoader three(pairs, sampler, {.batch_size = 5, .workers = 3, .seed = 4});
  const auto a = whole_epoch(alone, 3);
  const auto b = whole_epoch(three, 3);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].images.to_vector<float>(), b[i].images.to_vector<float>()) << "batch " << i;
  }
  // The augmentation moves with the epoch: another epoch draws other noise.
  const auto c = whole_epoch(alone, 4);
  EXPECT_NE(a[0].images.to_vector<float>(), c[0].images.to_vector<float>());
}

TEST(Dataset, ExamplesOfAnotherShapeAreRefusedNamingTheExample) {
  const auto ragged = std::make_shared<Ragged>();
  DataLoader loader(ragged, std::make_shared<SequentialSampler>(8),
                    {.batch_size = 8, .workers = 1});
  loader.start_epoch(0);
  try {
    loader.next();
    FAIL() << "a batch of two shapes was stacked";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("example 5's input"), std::string::npos) << e.what();
  }
}

TEST(Dataset, AnEmptyDataSetIsRefused) {
  EXPECT_THROW(DataLoader(std::make_shared<Pairs>(0), std::make_shared<SequentialSampler>(0),
                          {.batch_size = 2}),
               Error);
}

}  // namespace
}  // namespace tandem::data
