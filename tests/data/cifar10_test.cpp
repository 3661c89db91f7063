#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data/cifar10.h"
#include "engine/tandem.h"
#include "tests/support/error_message.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_paths.h"

namespace tandem::data {
namespace {

using testing::error_message;

// Writes records whose label is `first_label + i` (mod 10) and whose pixels are all `i`.
void write_records(const std::string& path, int64_t count, int first_label = 0) {
  std::ofstream out(path, std::ios::binary);
  for (int64_t i = 0; i < count; ++i) {
    out.put(static_cast<char>((first_label + i) % 10));
    out << std::string(kCifarImageBytes, static_cast<char>(i % 256));
  }
}

TEST(Cifar10, ReadsGeneratedFilesInOrder) {
  testing::TempDir dir;
  write_records(dir.file("a.bin"), 3, 0);
  write_records(dir.file("b.bin"), 2, 7);
  const CifarDataset data = read_cifar10_files({dir.file("a.bin"), dir.file("b.bin")}, 0, false);
  EXPECT_EQ(data.images.shape(), (Shape{5, 3, 32, 32}));
  EXPECT_EQ(data.labels.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 7, 8}));
  const auto pixels = data.images.to_vector<uint8_t>();
  EXPECT_EQ(pixels[2 * kCifarImageBytes + 100], 2);  // third image of a.bin
  EXPECT_EQ(pixels[4 * kCifarImageBytes], 1);        // second image of b.bin
  EXPECT_EQ(read_cifar10_files({dir.file("a.bin"), dir.file("b.bin")}, 4, false).size(), 4);
}

TEST(Cifar10, CorruptOrMissingFilesAreClearErrors) {
  testing::TempDir dir;
  write_records(dir.file("good.bin"), 2);
  std::filesystem::resize_file(dir.file("good.bin"), 2 * kCifarRecordBytes - 1);
  EXPECT_NE(error_message([&] {
              read_cifar10_files({dir.file("good.bin")}, 0, false);
            }).find("not a positive multiple of 3073"),
            std::string::npos);
  write_records(dir.file("small.bin"), 3);
  EXPECT_NE(error_message([&] {
              read_cifar10_files({dir.file("small.bin")}, 0, true);
            }).find("holds 3 records, expected 10000"),
            std::string::npos);
  {
    std::ofstream out(dir.file("label.bin"), std::ios::binary);
    out.put(static_cast<char>(42));
    out << std::string(kCifarImageBytes, '\0');
  }
  EXPECT_NE(error_message([&] {
              read_cifar10_files({dir.file("label.bin")}, 0, false);
            }).find("record 0 has label 42, expected 0-9"),
            std::string::npos);
  const std::string missing =
      error_message([&] { read_cifar10(dir.file("nowhere"), CifarSplit::Test); });
  EXPECT_NE(missing.find("test_batch.bin"), std::string::npos) << missing;
  EXPECT_NE(missing.find("get_cifar10.sh"), std::string::npos) << missing;
  // The folder above the archive's (the UX review's case 15) points to the one inside.
  std::filesystem::create_directories(dir.file("data/cifar-10-batches-bin"));
  write_records(dir.file("data/cifar-10-batches-bin/test_batch.bin"), 1);
  const std::string above =
      error_message([&] { read_cifar10(dir.file("data"), CifarSplit::Test); });
  EXPECT_NE(above.find("did you mean --data-dir " + dir.file("data/cifar-10-batches-bin") + "?"),
            std::string::npos)
      << above;
}

// Note [CIFAR-10 subsets]: the marker alone lets a folder hold fewer files and records. (Their
// md5 sums: ASubsetIsCheckedAgainstItsOwnMd5List.)
TEST(Cifar10, ASubsetFolderHoldsFewerTrainingFilesAndRecords) {
  const CifarReadOptions unchecked{.verify = false};
  testing::TempDir dir;
  const std::string folder = dir.file("subset");
  std::filesystem::create_directories(folder);
  write_records(folder + "/data_batch_1.bin", 3, 0);
  write_records(folder + "/test_batch.bin", 2, 5);
  const std::string unmarked = error_message([&] { read_cifar10(folder, CifarSplit::Test); });
  EXPECT_NE(unmarked.find("holds 2 records, expected 10000"), std::string::npos) << unmarked;
  const std::string partial = error_message([&] { read_cifar10(folder, CifarSplit::Train); });
  EXPECT_NE(partial.find("no " + folder + "/data_batch_2.bin"), std::string::npos) << partial;
  EXPECT_NE(partial.find("scripts/cifar_subset.sh"), std::string::npos) << partial;

  std::ofstream(folder + "/" + kCifarSubsetMarker) << "a test's subset\n";
  EXPECT_EQ(read_cifar10(folder, CifarSplit::Train, unchecked).size(), 3);
  EXPECT_EQ(read_cifar10(folder, CifarSplit::Train, {.limit = 2, .verify = false}).size(), 2);
  EXPECT_EQ(read_cifar10(folder, CifarSplit::Test, unchecked).labels.to_vector<int64_t>(),
            (std::vector<int64_t>{5, 6}));
  write_records(folder + "/data_batch_2.bin", 1, 9);
  EXPECT_EQ(read_cifar10(folder, CifarSplit::Train, unchecked).labels.to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 2, 9}));

  std::filesystem::resize_file(folder + "/test_batch.bin", kCifarRecordBytes + 7);
  const std::string truncated =
      error_message([&] { read_cifar10(folder, CifarSplit::Test, unchecked); });
  EXPECT_NE(truncated.find("not a positive multiple of 3073"), std::string::npos) << truncated;
  std::filesystem::remove(folder + "/data_batch_1.bin");
  const std::string no_first =
      error_message([&] { read_cifar10(folder, CifarSplit::Train, unchecked); });
  EXPECT_NE(no_first.find("data_batch_1.bin"), std::string::npos) << no_first;
}

// Note [CIFAR-10 md5 check]: files under the official names are the official files, unless the
// caller says they are its own (--no-verify-data).
TEST(Cifar10, OfficialNamesAreCheckedAgainstTheShippedMd5List) {
  EXPECT_EQ(cifar10_md5_sums().size(), 7u);  // scripts/cifar-10-batches-bin.md5, compiled in
  EXPECT_EQ(cifar10_md5_sums().at("test_batch.bin"), "803d5f7f4d78ea53de84dbe85f74fb6d");
  testing::TempDir dir;
  write_records(dir.file("test_batch.bin"), kCifarRecordsPerFile);
  const std::string own = error_message([&] { read_cifar10(dir.path(), CifarSplit::Test); });
  EXPECT_TRUE(testing::contains(
      own, "[cifar10] " + dir.file("test_batch.bin") + " does not match its md5 sum"))
      << own;
  EXPECT_TRUE(testing::contains(own, "803d5f7f4d78ea53de84dbe85f74fb6d")) << own;
  EXPECT_TRUE(testing::contains(own, "--no-verify-data")) << own;
  EXPECT_EQ(own.find('\n'), std::string::npos) << own;
  EXPECT_EQ(read_cifar10(dir.path(), CifarSplit::Test, {.verify = false}).size(),
            kCifarRecordsPerFile);
  EXPECT_FALSE(std::filesystem::exists(dir.file(kMd5StampName)));  // nothing vouched for
}

// A subset's test_batch.bin is cut short, so the subset carries its own list (cifar_subset.sh).
TEST(Cifar10, ASubsetIsCheckedAgainstItsOwnMd5List) {
  testing::TempDir dir;
  write_records(dir.file("data_batch_1.bin"), 3, 0);
  write_records(dir.file("test_batch.bin"), 2, 5);
  std::ofstream(dir.file(kCifarSubsetMarker)) << "a test's subset\n";
  const std::string unlisted = error_message([&] { read_cifar10(dir.path(), CifarSplit::Test); });
  EXPECT_TRUE(testing::contains(unlisted, "has no subset.md5")) << unlisted;
  EXPECT_TRUE(testing::contains(unlisted, "scripts/cifar_subset.sh")) << unlisted;
  std::ofstream(dir.file(kCifarSubsetMd5))
      << file_md5(dir.file("data_batch_1.bin")) << "  data_batch_1.bin\n"
      << file_md5(dir.file("test_batch.bin")) << "  test_batch.bin\n";
  EXPECT_EQ(read_cifar10(dir.path(), CifarSplit::Train).size(), 3);
  EXPECT_EQ(read_cifar10(dir.path(), CifarSplit::Test).size(), 2);
  EXPECT_TRUE(std::filesystem::exists(dir.file(kMd5StampName)));
  write_records(dir.file("test_batch.bin"), 2, 6);  // new labels, same size
  const std::string damaged = error_message([&] { read_cifar10(dir.path(), CifarSplit::Test); });
  EXPECT_TRUE(testing::contains(damaged, dir.file("test_batch.bin") + " does not match"))
      << damaged;
}

TEST(Cifar10, RealDataSetWhenPresent) {
  const std::string folder = testing::kCifar10Dir;
  if (!std::filesystem::exists(folder + "/test_batch.bin")) {
    GTEST_SKIP() << "no CIFAR-10 at " << folder << " (scripts/get_cifar10.sh)";
  }
  const CifarDataset train = read_cifar10(folder, CifarSplit::Train);
  const CifarDataset test = read_cifar10(folder, CifarSplit::Test);
  ASSERT_EQ(train.size(), 50000);
  ASSERT_EQ(test.size(), 10000);
  EXPECT_EQ(train.labels.to_vector<int64_t>()[0], 6);
  EXPECT_EQ(cifar10_class_names()[6], "frog");
  for (const auto& [data, per_class] : {std::pair{&train, 5000}, std::pair{&test, 1000}}) {
    std::vector<int> counts(10, 0);
    for (int64_t label : data->labels.to_vector<int64_t>()) ++counts[static_cast<size_t>(label)];
    EXPECT_EQ(counts, std::vector<int>(10, per_class));
  }
  EXPECT_EQ(read_cifar10(folder, CifarSplit::Train, {.limit = 100}).size(), 100);
}

// The case the size checks cannot see: two official files swapped (links, so nothing is copied).
TEST(Cifar10, SwappedRealFilesAreRefusedWhenPresent) {
  const std::string folder = testing::kCifar10Dir;
  if (!std::filesystem::exists(folder + "/test_batch.bin")) {
    GTEST_SKIP() << "no CIFAR-10 at " << folder << " (scripts/get_cifar10.sh)";
  }
  testing::TempDir dir;
  for (int i = 1; i <= 5; ++i) {
    const int source = i == 1 ? 2 : i == 2 ? 1 : i;
    std::filesystem::create_symlink(folder + "/data_batch_" + std::to_string(source) + ".bin",
                                    dir.file("data_batch_" + std::to_string(i) + ".bin"));
  }
  const std::string swapped = error_message([&] { read_cifar10(dir.path(), CifarSplit::Train); });
  EXPECT_TRUE(testing::contains(
      swapped, dir.file("data_batch_1.bin") + " does not match its md5 sum (" +
                   cifar10_md5_sums().at("data_batch_2.bin") + ", which is data_batch_2.bin's"))
      << swapped;
  EXPECT_EQ(read_cifar10(dir.path(), CifarSplit::Train, {.verify = false}).size(), 50000);
}

// CIFAR-10 as a data set (dataset.h): the images through the transforms.
TEST(CifarImages, MakeBatchGathersImagesAndLabels) {
  CifarDataset data{zeros({3, 3, 32, 32}, {.dtype = DType::UInt8}),
                    from_vector<int64_t>({4, 5, 6}, {3})};
  data.images.slice(2, 3).fill_(255);
  const Batch batch = make_batch(data, {2, 0}, eval_transform(), /*augmentation_seed=*/0);
  EXPECT_EQ(batch.images.shape(), (Shape{2, 3, 32, 32}));
  EXPECT_EQ(batch.labels.to_vector<int64_t>(), (std::vector<int64_t>{6, 4}));
  EXPECT_NEAR(batch.images.to_vector<float>()[0], (1.0f - kCifarMean[0]) / kCifarStd[0], 1e-5f);
  EXPECT_THROW(make_batch(data, {3}, eval_transform(), 0), Error);
}

TEST(CifarImages, GetIsOneRowOfItsBatch) {
  const auto data = std::make_shared<const CifarDataset>(synthetic_cifar10(6, 3));
  const CifarImages images(data, TransformOptions{});
  const Batch batch = make_batch(images, {4, 1}, /*augmentation_seed=*/9);
  Generator generator = image_generator(9, 1);
  const Example second = images.get(1, generator);
  EXPECT_EQ(second.input.shape(), (Shape{3, 32, 32}));
  EXPECT_EQ(second.target.shape(), Shape{});
  const auto rows = batch.images.to_vector<float>();
  const auto expected = second.input.to_vector<float>();
  EXPECT_EQ(std::vector<float>(rows.begin() + 3 * 32 * 32, rows.end()), expected);
  EXPECT_EQ(batch.labels.to_vector<int64_t>()[1], static_cast<int64_t>(second.target.item()));
}

}  // namespace
}  // namespace tandem::data
