#pragma once
/// The CIFAR-10 binary format: files of 3,073-byte records (1 label byte, then 1,024 red,
/// 1,024 green and 1,024 blue bytes of a 32×32 image, row-major). data_batch_1..5.bin are the
/// training set, test_batch.bin the test set; the official files hold 10,000 records each.
/// CifarImages is the data set (dataset.h) the loader sees: the images through the transforms.
///
///   auto train = std::make_shared<CifarDataset>(read_cifar10(folder, CifarSplit::Train));
///   DataLoader loader(std::make_shared<CifarImages>(train), sampler, {.batch_size = 128});

#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/integrity.h"
#include "data/transforms.h"
#include "engine/tensor.h"

namespace tandem::data {

constexpr int64_t kCifarImageBytes = 3 * 32 * 32;
constexpr int64_t kCifarRecordBytes = 1 + kCifarImageBytes;
constexpr int64_t kCifarRecordsPerFile = 10000;
constexpr int64_t kCifarClasses = 10;

/// Images and labels in host memory.
struct CifarDataset {
  Tensor images;  ///< (N, 3, 32, 32) uint8
  Tensor labels;  ///< (N) int64 in [0, 10)
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

enum class CifarSplit { Train, Test };

/// Marks a folder as a subset of CIFAR-10 (Note [CIFAR-10 subsets] in cifar10.cpp).
inline constexpr const char* kCifarSubsetMarker = "subset.txt";
/// A subset's own md5 list (md5sum's format), which its files are checked against.
inline constexpr const char* kCifarSubsetMd5 = "subset.md5";

struct CifarReadOptions {
  int64_t limit = 0;   ///< > 0: only the first `limit` images (quick runs)
  bool verify = true;  ///< check the files' md5 sums (Note [CIFAR-10 md5 check] in cifar10.cpp);
                       ///< false for a data set of one's own in CIFAR-10's format
};

/// Reads a split from the folder holding the .bin files (e.g. DIR/cifar-10-batches-bin). A
/// missing, truncated or foreign file is an error naming the file and what was expected; so is
/// one whose md5 sum is not the official file's (cifar10_md5_sums), unless `verify` is false. A
/// folder holding kCifarSubsetMarker is a subset: its training files are the data_batch_N.bin
/// present, its files may hold any whole number of records, and their md5 sums are those of its
/// kCifarSubsetMd5.
CifarDataset read_cifar10(const std::string& folder, CifarSplit split,
                          const CifarReadOptions& options = {});

/// The official files' md5 sums: scripts/cifar-10-batches-bin.md5, compiled in.
const Md5Sums& cifar10_md5_sums();

/// Reads the given files in order. With `official_sizes`, each must hold exactly 10,000 records.
CifarDataset read_cifar10_files(const std::vector<std::string>& files, int64_t limit,
                                bool official_sizes);

/// The ten class names, by label.
const std::vector<std::string>& cifar10_class_names();

/// Random images and labels with CIFAR-10's shapes, for benchmarks and smoke runs: the same
/// loader path as the real data. Each class has its own mean colour under heavy noise, so a model
/// can learn it and a short run's loss falls.
CifarDataset synthetic_cifar10(int64_t size, uint64_t seed);

/// CIFAR-10 images as the training (or test) code sees them: transformed (transforms.h; by
/// default the training augmentation, eval_transform() for evaluation) into (3, 32, 32) float32,
/// with the class as a () int64 target.
class CifarImages final : public Dataset {
 public:
  explicit CifarImages(std::shared_ptr<const CifarDataset> images, TransformOptions transform = {});
  int64_t size() const override { return images_->size(); }
  Example get(int64_t index, Generator& generator) const override;
  ExampleLayout layout() const override;
  void write_example(int64_t index, Generator& generator, Tensor& input,
                     Tensor& target) const override;

 private:
  std::shared_ptr<const CifarDataset> images_;
  TransformOptions transform_;
};

/// CIFAR-10 batches without a CifarImages of one's own (benchmarks, tests).
Batch make_batch(const CifarDataset& dataset, const std::vector<int64_t>& indices,
                 const TransformOptions& options, uint64_t augmentation_seed);

}  // namespace tandem::data
