// The default CIFAR-10 folder (Note [Default data folder]): the environment is passed in, and the
// working directory is a scratch folder, so neither the real $HOME nor ./data is looked at.
#include "apps/common/data_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "tests/support/error_message.h"
#include "tests/support/temp_dir.h"

namespace tandem::apps {
namespace {

using testing::error_message;

parallel::EnvLookup environment(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const std::string& name) -> std::optional<std::string> {
    const auto found = variables.find(name);
    if (found == variables.end()) return std::nullopt;
    return found->second;
  };
}

// Runs the test inside a scratch folder (where ./data is looked for), and back out after.
class DataDir : public ::testing::Test {
 protected:
  DataDir() : before_(std::filesystem::current_path()) {
    std::filesystem::current_path(dir_.file(""));
  }
  ~DataDir() override { std::filesystem::current_path(before_); }

  std::string make(const std::string& name) {
    std::filesystem::create_directories(dir_.file(name));
    return dir_.file(name);
  }

  testing::TempDir dir_;
  std::filesystem::path before_;
};

TEST_F(DataDir, TandemDataDirComesFirst) {
  const std::string home = make("home"), mine = make("mine");
  make("home/.local/share/tandem/cifar-10-batches-bin");
  make("mine/cifar-10-batches-bin");
  const auto env = environment({{"TANDEM_DATA_DIR", mine}, {"HOME", home}});
  EXPECT_EQ(default_data_places(env),
            (std::vector<std::string>{mine + "/cifar-10-batches-bin", kOldDataDir}));
  const DataDirChoice chosen = choose_data_dir("train_cifar", "", "pass --data-dir DIR", env);
  EXPECT_EQ(chosen.dir, mine + "/cifar-10-batches-bin");
  EXPECT_EQ(chosen.notice, "");
}

TEST_F(DataDir, XdgDataHomeThenHome) {
  const std::string home = make("home"), xdg = make("xdg");
  EXPECT_EQ(default_data_places(environment({{"XDG_DATA_HOME", xdg}, {"HOME", home}})).front(),
            xdg + "/tandem/cifar-10-batches-bin");
  // Unset, empty or relative (which the XDG spec says to ignore): $HOME/.local/share.
  for (const char* xdg_value : {"", "relative/share"}) {
    EXPECT_EQ(
        default_data_places(environment({{"XDG_DATA_HOME", xdg_value}, {"HOME", home}})).front(),
        home + "/.local/share/tandem/cifar-10-batches-bin");
  }
  make("home/.local/share/tandem/cifar-10-batches-bin");
  EXPECT_EQ(choose_data_dir("train_cifar", "", "", environment({{"HOME", home}})).dir,
            home + "/.local/share/tandem/cifar-10-batches-bin");
}

TEST_F(DataDir, OldPlaceIsFoundWithANotice) {
  const std::string home = make("home");
  make("data/cifar-10-batches-bin");
  const DataDirChoice chosen =
      choose_data_dir("bench_cifar", "", "", environment({{"HOME", home}}));
  EXPECT_EQ(chosen.dir, kOldDataDir);
  EXPECT_EQ(chosen.notice, "bench_cifar: reading CIFAR-10 from its old place " +
                               std::string(kOldDataDir) + "; move it to " + home +
                               "/.local/share/tandem/cifar-10-batches-bin (found from any folder)");
}

TEST_F(DataDir, NothingFoundNamesThePlacesAndTheFetch) {
  const std::string home = make("home");
  const std::string message = error_message([&] {
    choose_data_dir("train_cifar", "", "pass --data-dir DIR or --synthetic",
                    environment({{"HOME", home}}));
  });
  EXPECT_NE(message.find("[train_cifar] no CIFAR-10 at " + home +
                         "/.local/share/tandem/cifar-10-batches-bin (nor at the old "
                         "./data/cifar-10-batches-bin): run scripts/get_cifar10.sh, or pass "
                         "--data-dir DIR or --synthetic"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
  // No HOME at all: only the old place is looked at.
  EXPECT_NE(error_message([&] {
              choose_data_dir("train_cifar", "", "x", environment({}));
            }).find("no CIFAR-10 at ./data/cifar-10-batches-bin: run"),
            std::string::npos);
}

TEST_F(DataDir, TandemDataDirNamingTheBatchesFolderItselfSaysWhatWasMeant) {
  const std::string inner = make("mine/cifar-10-batches-bin");
  std::ofstream(inner + "/test_batch.bin") << "x";
  const std::string message = error_message([&] {
    choose_data_dir("train_cifar", "", "x", environment({{"TANDEM_DATA_DIR", inner}}));
  });
  EXPECT_NE(message.find("TANDEM_DATA_DIR=" + inner +
                         " holds its files: did you mean "
                         "TANDEM_DATA_DIR=" +
                         dir_.file("mine") + "?"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

TEST_F(DataDir, GivenFolderWinsAndIsChecked) {
  const std::string given = make("given");
  make("data/cifar-10-batches-bin");
  EXPECT_EQ(choose_data_dir("train_cifar", given, "", environment({})).dir, given);
  EXPECT_NE(error_message([&] {
              choose_data_dir("train_cifar", "/nonexistent", "x", environment({}));
            }).find("[train_cifar] no CIFAR-10 at /nonexistent: run scripts/get_cifar10.sh"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::apps
