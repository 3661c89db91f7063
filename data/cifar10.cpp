#include "data/cifar10.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "engine/ops/factory.h"
#include "engine/random.h"

namespace tandem::data {
namespace {

// Bytes to read from one file: all its records, or fewer when the limit is reached.
int64_t checked_record_count(const std::string& file, bool official_sizes) {
  std::error_code error;
  const auto bytes = static_cast<int64_t>(std::filesystem::file_size(file, error));
  TANDEM_CHECK(!error, "[cifar10] cannot read ", file, ": ", error.message(),
               " (scripts/get_cifar10.sh [DIR] fetches the data set; by default into "
               "$TANDEM_DATA_DIR, else ~/.local/share/tandem, where the programs look)");
  TANDEM_CHECK(bytes % kCifarRecordBytes == 0 && bytes > 0, "[cifar10] ", file, " has ", bytes,
               " bytes, not a positive multiple of ", kCifarRecordBytes,
               " (1 label + 3,072 pixel bytes): truncated or not the CIFAR-10 binary version");
  const int64_t records = bytes / kCifarRecordBytes;
  TANDEM_CHECK(!official_sizes || records == kCifarRecordsPerFile, "[cifar10] ", file, " holds ",
               records, " records, expected ", kCifarRecordsPerFile, " (",
               kCifarRecordsPerFile * kCifarRecordBytes, " bytes): truncated?");
  return records;
}

// Note [CIFAR-10 subsets]: a GPU node is lent for minutes with 64 MiB of carried files, too
// little for the 170 MB data set, so scripts/cifar_subset.sh writes a folder with data_batch_1.bin
// and the first test images, and marks it with kCifarSubsetMarker. Only the marker relaxes the
// checks: in a folder without it a missing data_batch_2..5.bin or a short file is still the error
// of a broken download, not a quietly smaller data set. In a subset each file must still hold
// whole records, so a truncated copy is caught there too.
std::vector<std::string> train_files(const std::string& folder, bool subset) {
  std::vector<std::string> files;
  for (int i = 1; i <= 5; ++i) {
    std::string file = folder + "/data_batch_" + std::to_string(i) + ".bin";
    if (i > 1 && !std::filesystem::exists(file) && std::filesystem::exists(files.front())) {
      if (subset) break;
      TANDEM_FAIL(
          "[cifar10] ", folder, " has data_batch_1.bin but no ", file,
          " (scripts/get_cifar10.sh puts all five there); a subset (scripts/cifar_subset.sh) "
          "holds a file ",
          kCifarSubsetMarker);
    }
    files.push_back(std::move(file));
  }
  return files;
}

// Note [CIFAR-10 md5 check]: the size and label checks catch a short or foreign file, not a damaged
// pixel, one file copied over another (all six have one size) or two swapped (the test set trained
// on). So read_cifar10 also checks its files against their md5 sums, as torchvision's
// check_integrity does, and the stamp (Note [md5 stamps]) spares later runs the half second. It
// checks after reading, so that a short or foreign file gets the reader's more precise message.
// Only read_cifar10 checks: it reads the official names, whose sums are known; read_cifar10_files
// reads any files (tests, the fuzz target). A subset's test_batch.bin is cut short, so a subset
// carries its own list (scripts/cifar_subset.sh writes it). Files of one's own in CIFAR-10's format
// under the official names are read with verify = false (train_cifar --no-verify-data).
void check_cifar10_md5(const std::string& folder, const std::vector<std::string>& files,
                       bool subset) {
  const std::string subset_list = folder + "/" + kCifarSubsetMd5;
  TANDEM_CHECK(!subset || std::filesystem::exists(subset_list), "[cifar10] the subset ", folder,
               " has no ", kCifarSubsetMd5,
               " to check its files against: write it again with "
               "scripts/cifar_subset.sh, or read it unchecked (--no-verify-data)");
  std::vector<std::string> names;
  names.reserve(files.size());
  for (const std::string& file : files) names.push_back(std::filesystem::path(file).filename());
  check_md5_sums(
      folder, names, subset ? read_md5_sums(subset_list) : cifar10_md5_sums(),
      {.op = "[cifar10]",
       .remedy = std::string(subset ? "scripts/cifar_subset.sh writes the subset again"
                                    : "scripts/get_cifar10.sh fetches the data set again") +
                 "; a data set of one's own in CIFAR-10's format is read with "
                 "--no-verify-data",
       .stamp = md5_stamp_path(folder)});
}

}  // namespace

CifarDataset read_cifar10_files(const std::vector<std::string>& files, int64_t limit,
                                bool official_sizes) {
  TANDEM_CHECK(limit >= 0, "[cifar10] limit must be >= 0, got ", limit);
  std::vector<int64_t> counts;
  int64_t total = 0;
  for (const std::string& file : files) {
    counts.push_back(checked_record_count(file, official_sizes));
    total += counts.back();
  }
  const int64_t wanted = limit > 0 ? std::min(limit, total) : total;
  CifarDataset dataset{empty({wanted, 3, 32, 32}, {.dtype = DType::UInt8}),
                       empty({wanted}, {.dtype = DType::Int64})};
  uint8_t* images = dataset.images.data<uint8_t>();
  int64_t* labels = dataset.labels.data<int64_t>();
  std::vector<char> record(static_cast<size_t>(kCifarRecordBytes));
  int64_t filled = 0;
  for (size_t f = 0; f < files.size() && filled < wanted; ++f) {
    std::ifstream in(files[f], std::ios::binary);
    TANDEM_CHECK(in.good(), "[cifar10] cannot open ", files[f], ": ", std::strerror(errno));
    for (int64_t r = 0; r < counts[f] && filled < wanted; ++r, ++filled) {
      TANDEM_CHECK(in.read(record.data(), kCifarRecordBytes), "[cifar10] ", files[f],
                   " ended inside record ", r);
      const auto label = static_cast<uint8_t>(record[0]);
      TANDEM_CHECK(label < kCifarClasses, "[cifar10] ", files[f], ": record ", r, " has label ",
                   int(label), ", expected 0-9 (CIFAR-100 or another file?)");
      labels[filled] = label;
      std::memcpy(images + filled * kCifarImageBytes, record.data() + 1, kCifarImageBytes);
    }
  }
  return dataset;
}

CifarDataset read_cifar10(const std::string& folder, CifarSplit split,
                          const CifarReadOptions& options) {
  // The usual mistake: the folder above the one the archive unpacks into.
  const std::string inner = folder + "/cifar-10-batches-bin";
  TANDEM_CHECK(std::filesystem::exists(folder + "/test_batch.bin") ||
                   !std::filesystem::exists(inner + "/test_batch.bin"),
               "[cifar10] ", folder, " holds no CIFAR-10 files, but ", inner,
               " does: did you mean --data-dir ", inner, "?");
  const bool subset = std::filesystem::exists(folder + "/" + kCifarSubsetMarker);
  const std::vector<std::string> files = split == CifarSplit::Train
                                             ? train_files(folder, subset)
                                             : std::vector<std::string>{folder + "/test_batch.bin"};
  CifarDataset dataset = read_cifar10_files(files, options.limit, /*official_sizes=*/!subset);
  if (options.verify) check_cifar10_md5(folder, files, subset);
  return dataset;
}

const std::vector<std::string>& cifar10_class_names() {
  static const std::vector<std::string> names = {
      "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
  return names;
}

CifarDataset synthetic_cifar10(int64_t size, uint64_t seed) {
  TANDEM_CHECK(size >= 1, "[synthetic_cifar10] size must be >= 1");
  CifarDataset data{empty({size, 3, 32, 32}, {.dtype = DType::UInt8}),
                    empty({size}, {.dtype = DType::Int64})};
  Generator generator(seed);
  uint8_t* pixels = data.images.data<uint8_t>();
  int64_t* labels = data.labels.data<int64_t>();
  constexpr int64_t kPlane = 32 * 32;
  for (int64_t i = 0; i < size; ++i) {
    const int64_t label = static_cast<int64_t>(generator.next_u64() % kCifarClasses);
    labels[i] = label;
    // Each class has its own mean colour under heavy noise: learnable, so a short run shows the
    // loss falling, yet not trivially separable pixel by pixel.
    for (int64_t channel = 0; channel < 3; ++channel) {
      const int64_t mean = 48 + 16 * ((label * (channel + 3) + channel) % kCifarClasses);
      uint8_t* plane = pixels + i * kCifarImageBytes + channel * kPlane;
      for (int64_t p = 0; p < kPlane; ++p) {
        const int64_t noise = static_cast<int64_t>(generator.next_u64() % 129) - 64;
        plane[p] = static_cast<uint8_t>(std::clamp<int64_t>(mean + noise, 0, 255));
      }
    }
  }
  return data;
}

CifarImages::CifarImages(std::shared_ptr<const CifarDataset> images, TransformOptions transform)
    : images_(std::move(images)), transform_(transform) {
  TANDEM_CHECK(images_ != nullptr, "[CifarImages] needs images");
}

ExampleLayout CifarImages::layout() const {
  return {{3, 32, 32}, DType::Float32, {}, DType::Int64};
}

Example CifarImages::get(int64_t index, Generator& generator) const {
  Example example{empty({3, 32, 32}), empty({}, {.dtype = DType::Int64})};
  write_example(index, generator, example.input, example.target);
  return example;
}

void CifarImages::write_example(int64_t index, Generator& generator, Tensor& input,
                                Tensor& target) const {
  check_index(*this, index);
  TANDEM_CHECK(input.shape() == Shape({3, 32, 32}) && target.numel() == 1,
               "[CifarImages] writes (3, 32, 32) float32 images and one int64 label each");
  const uint8_t* pixels = images_->images.data<uint8_t>() + index * kCifarImageBytes;
  transform_image(pixels, input.data<float>(), transform_, generator);
  *target.data<int64_t>() = images_->labels.data<int64_t>()[index];
}

Batch make_batch(const CifarDataset& dataset, const std::vector<int64_t>& indices,
                 const TransformOptions& options, uint64_t augmentation_seed) {
  // Not owned: the images outlive this call.
  const CifarImages images(std::shared_ptr<const CifarDataset>(std::shared_ptr<void>(), &dataset),
                           options);
  return make_batch(images, indices, augmentation_seed);
}

}  // namespace tandem::data
