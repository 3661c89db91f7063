#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "data/integrity.h"
#include "tests/support/error_message.h"
#include "tests/support/temp_dir.h"

namespace tandem::data {
namespace {

using testing::contains;
using testing::error_message;

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Files of one size and one mtime, as tar leaves CIFAR-10's six: only their bytes tell them apart.
Md5Sums write_alike_files(const testing::TempDir& dir, const std::vector<std::string>& names) {
  const auto mtime = std::filesystem::file_time_type::clock::now() - std::chrono::hours(24);
  Md5Sums sums;
  for (size_t i = 0; i < names.size(); ++i) {
    write_file(dir.file(names[i]), std::string(1000, static_cast<char>('a' + i)));
    std::filesystem::last_write_time(dir.file(names[i]), mtime);
    sums[names[i]] = file_md5(dir.file(names[i]));
  }
  return sums;
}

TEST(Md5Sums, FileMd5AndMd5sumsListFormat) {
  testing::TempDir dir;
  write_file(dir.file("abc"), "abc");
  write_file(dir.file("empty"), "");
  EXPECT_EQ(file_md5(dir.file("abc")), "900150983cd24fb0d6963f7d28e17f72");  // RFC 1321's
  EXPECT_EQ(file_md5(dir.file("empty")), "d41d8cd98f00b204e9800998ecf8427e");
  const Md5Sums sums = parse_md5_sums(
      "5dd7e06a14cb22eb9f671a540d1b7c25  cifar-10-batches-bin/data_batch_1.bin\n"
      "803d5f7f4d78ea53de84dbe85f74fb6d *test_batch.bin\n",
      "a list");
  EXPECT_EQ(sums, (Md5Sums{{"data_batch_1.bin", "5dd7e06a14cb22eb9f671a540d1b7c25"},
                           {"test_batch.bin", "803d5f7f4d78ea53de84dbe85f74fb6d"}}));
  const std::string bad = error_message([] { parse_md5_sums("5DD7  a.bin\n", "my.md5"); });
  EXPECT_TRUE(contains(bad, "[md5] my.md5: the line '5DD7  a.bin' is not md5sum's")) << bad;
  EXPECT_TRUE(contains(error_message([&] { read_md5_sums(dir.file("none.md5")); }), "none.md5"));
}

// torchvision's check_integrity cases: each refused naming the file, and what it holds instead.
TEST(Md5Sums, DamagedSwappedAndCopiedFilesAreRefusedNamingThem) {
  testing::TempDir dir;
  const Md5Sums sums = write_alike_files(dir, {"a.bin", "b.bin"});
  const Md5CheckOptions options{
      .op = "[test]", .remedy = "fetch them again", .stamp = dir.file("stamp")};
  const auto check = [&] { check_md5_sums(dir.path(), {"a.bin", "b.bin"}, sums, options); };
  EXPECT_EQ(error_message(check), "(no error)");
  ASSERT_TRUE(std::filesystem::exists(dir.file("stamp")));

  // Swapped under a stamp: sizes and mtimes as before, only the inodes moved.
  std::filesystem::rename(dir.file("a.bin"), dir.file("c.bin"));
  std::filesystem::rename(dir.file("b.bin"), dir.file("a.bin"));
  std::filesystem::rename(dir.file("c.bin"), dir.file("b.bin"));
  const std::string swapped = error_message(check);
  EXPECT_TRUE(contains(swapped, "[test] " + dir.file("a.bin") + " does not match its md5 sum (" +
                                    sums.at("b.bin") + ", which is b.bin's; expected " +
                                    sums.at("a.bin") +
                                    "): damaged, or another file under its "
                                    "name; fetch them again"))
      << swapped;

  std::filesystem::copy_file(dir.file("b.bin"), dir.file("a.bin"),
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_TRUE(contains(error_message(check), "which is a.bin's")) << error_message(check);
  write_file(dir.file("a.bin"), std::string(999, 'a') + "!");
  const std::string damaged = error_message(check);
  EXPECT_TRUE(contains(damaged, dir.file("a.bin") + " does not match")) << damaged;
  EXPECT_FALSE(contains(damaged, "which is")) << damaged;

  const std::string unlisted =
      error_message([&] { check_md5_sums(dir.path(), {"other.bin"}, sums, options); });
  EXPECT_TRUE(contains(unlisted, "other.bin has no md5 sum in the list")) << unlisted;
  const std::string missing = error_message([&] {
    check_md5_sums(dir.path(), {"gone.bin"}, {{"gone.bin", sums.at("a.bin")}}, options);
  });
  EXPECT_TRUE(contains(missing, "[test] cannot read " + dir.file("gone.bin"))) << missing;
}

// Note [md5 stamps]: a file the stamp records as it is now is not read again.
TEST(Md5Sums, AStampSparesTheHashUntilTheFileChanges) {
  testing::TempDir dir;
  const Md5Sums sums = write_alike_files(dir, {"a.bin"});
  const Md5CheckOptions options{.op = "[test]", .remedy = "", .stamp = dir.file("stamp")};
  const auto check = [&] { check_md5_sums(dir.path(), {"a.bin"}, sums, options); };
  check();
  // Damaged in place with its size and mtime put back: the stamp vouches for it, so it cannot
  // have been read (the limit the note states).
  const auto mtime = std::filesystem::last_write_time(dir.file("a.bin"));
  {
    std::fstream file(dir.file("a.bin"), std::ios::in | std::ios::out | std::ios::binary);
    file.put('!');
  }
  std::filesystem::last_write_time(dir.file("a.bin"), mtime);
  EXPECT_EQ(error_message(check), "(no error)");
  // A new mtime (any ordinary write) has it hashed again.
  std::filesystem::last_write_time(dir.file("a.bin"), mtime + std::chrono::seconds(1));
  EXPECT_TRUE(contains(error_message(check), "does not match its md5 sum"));
  // So does a stamp deleted, or none at all.
  std::filesystem::last_write_time(dir.file("a.bin"), mtime);
  EXPECT_EQ(error_message(check), "(no error)");
  std::filesystem::remove(dir.file("stamp"));
  EXPECT_TRUE(contains(error_message(check), "does not match its md5 sum"));
  EXPECT_TRUE(contains(error_message([&] { check_md5_sums(dir.path(), {"a.bin"}, sums, {}); }),
                       "does not match its md5 sum"));
}

TEST(Md5Sums, AReadOnlyFolderKeepsItsStampInTheUsersCache) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.file("data"));
  EXPECT_EQ(md5_stamp_path(dir.file("data")), dir.file("data") + "/" + kMd5StampName);
  if (::geteuid() == 0) GTEST_SKIP() << "root may write into a read-only folder";
  std::filesystem::permissions(dir.file("data"), std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::remove);
  const char* old_cache = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old_cache != nullptr ? old_cache : "";
  ::setenv("XDG_CACHE_HOME", dir.file("cache").c_str(), 1);
  const std::string stamp = md5_stamp_path(dir.file("data"));
  old_cache != nullptr ? ::setenv("XDG_CACHE_HOME", saved.c_str(), 1)
                       : ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(stamp.rfind(dir.file("cache") + "/tandem/md5-stamps/", 0), 0u) << stamp;
}

}  // namespace
}  // namespace tandem::data
