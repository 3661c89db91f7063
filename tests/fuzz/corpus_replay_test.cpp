// Replays every input kept in tests/fuzz/corpus (the seeds, and the input of every crash the
// fuzzers found, once fixed) through the fuzz targets' bodies, in the normal build and under
// the sanitizers CI runs: a fixed parser bug stays fixed without libFuzzer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "tests/fuzz/targets.h"
#include "tests/support/test_paths.h"

namespace tandem::fuzz {
namespace {

using Target = int (*)(const uint8_t*, size_t);

void replay(const std::string& name, Target target) {
  const std::filesystem::path folder =
      std::filesystem::path(tandem::testing::kFuzzCorpusDir) / name;
  ASSERT_TRUE(std::filesystem::is_directory(folder)) << folder;
  int inputs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
    EXPECT_EQ(target(bytes.data(), bytes.size()), 0) << entry.path();
    ++inputs;
  }
  EXPECT_GT(inputs, 0) << "no inputs in " << folder;
}

TEST(FuzzCorpus, Safetensors) {
  replay("safetensors", safetensors);
}
TEST(FuzzCorpus, Checkpoint) {
  replay("checkpoint", checkpoint);
}
TEST(FuzzCorpus, Cifar10) {
  replay("cifar10", cifar10);
}
TEST(FuzzCorpus, StoreRequest) {
  replay("store_request", store_request);
}
TEST(FuzzCorpus, StoreSession) {
  replay("store_session", store_session);
}
TEST(FuzzCorpus, LaunchEnv) {
  replay("launch_env", launch_env);
}
TEST(FuzzCorpus, FileStoreRecords) {
  replay("file_store_records", file_store_records);
}

}  // namespace
}  // namespace tandem::fuzz
