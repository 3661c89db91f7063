// What a run's outputs may be (apps/common/output_paths.h, output_lock.h): nothing but regular
// files replaced by a save, no two outputs one file, one writer per output at a time.
#include "apps/common/output_paths.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "apps/common/output_lock.h"
#include "engine/error.h"
#include "tests/support/temp_dir.h"

namespace tandem::apps {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// The message of the tandem::Error that `call` throws, or "" when it throws none.
template <typename Call>
std::string error_of(Call call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(OutputPaths, ASaveReplacesOnlyRegularFiles) {
  TempDir dir;
  const auto replacing = [&](const std::string& path) {
    return error_of([&] { check_replaceable("train_cifar", "--save", path); });
  };
  EXPECT_EQ(replacing(dir.file("new.ckpt")), "");  // nothing there yet
  std::ofstream(dir.file("old.ckpt")) << "weights";
  EXPECT_EQ(replacing(dir.file("old.ckpt")), "");
  ASSERT_EQ(::mkfifo(dir.file("pipe").c_str(), 0600), 0);
  EXPECT_NE(replacing(dir.file("pipe"))
                .find("--save " + dir.file("pipe") +
                      ": is not a regular file (a device, pipe or socket)"),
            std::string::npos);
  EXPECT_NE(replacing("/dev/null").find("is not a regular file"), std::string::npos);
  fs::create_symlink(dir.file("old.ckpt"), dir.file("link.ckpt"));
  const std::string link = replacing(dir.file("link.ckpt"));
  EXPECT_NE(link.find("is a symbolic link; a save replaces the link itself"), std::string::npos)
      << link;
  EXPECT_NE(link.find("(" + fs::canonical(dir.file("old.ckpt")).string() + ")"), std::string::npos)
      << link;
  EXPECT_TRUE(fs::is_fifo(dir.file("pipe")));  // untouched
}

TEST(OutputPaths, OneFileUnderTwoFlagsIsRefused) {
  TempDir dir;
  const std::string save = dir.file("run.ckpt");
  const auto outputs = [&](const std::string& log) {
    return error_of([&] {
      check_distinct_outputs(
          "train_cifar",
          {{save, "--save"}, {save + ".state", "--save's sidecar"}, {log, "--log-json"}});
    });
  };
  EXPECT_EQ(outputs(dir.file("run.jsonl")), "");
  EXPECT_EQ(outputs(""), "");  // no log asked for
  EXPECT_NE(outputs(save).find("--log-json " + save + " is also --save (" + save +
                               "), which would overwrite it: give each output its own file"),
            std::string::npos);
  // The same file under another spelling, or through a symbolic link to its folder.
  EXPECT_NE(
      outputs((dir.path() / "." / "run.ckpt.state").string()).find("is also --save's sidecar"),
      std::string::npos);
  fs::create_directory_symlink(dir.path(), dir.file("alias"));
  EXPECT_NE(outputs(dir.file("alias/run.ckpt")).find("is also --save"), std::string::npos);
}

// The lock is per process (flock on PATH.lock): a child process stands in for a second run.
TEST(OutputLock, ASecondWriterIsRefusedAndTheLockGoesWithTheFirst) {
  TempDir dir;
  const std::string save = dir.file("run.ckpt");
  const auto second_run_exit = [&] {
    const pid_t child = fork();
    if (child == 0) {
      try {
        OutputLock lock("train_cifar", "--save", save);
      } catch (const Error& e) {
        const std::string message = e.what();
        const bool named = message.find("--save " + save + " is being written by another run") !=
                               std::string::npos &&
                           message.find("pid " + std::to_string(getppid())) != std::string::npos;
        _exit(named ? 1 : 2);
      }
      _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  {
    OutputLock first("train_cifar", "--save", save);
    EXPECT_TRUE(fs::exists(OutputLock::lock_path(save)));
    EXPECT_EQ(second_run_exit(), 1);  // refused, naming this process
  }
  EXPECT_FALSE(fs::exists(OutputLock::lock_path(save)));  // removed with the lock
  EXPECT_EQ(second_run_exit(), 0);
  // A device (--log-json /dev/null) is nobody's file: no lock file beside it.
  OutputLock device("train_cifar", "--log-json", "/dev/null");
  EXPECT_FALSE(fs::exists("/dev/null.lock"));
}

// Review S8: a symlink planted at PATH.lock used to have its target truncated and overwritten
// with the run's name; now the lock is refused, naming it, and the target is left alone.
TEST(OutputLock, ASymlinkAtTheLockIsRefusedAndItsTargetUntouched) {
  TempDir dir;
  const std::string save = dir.file("run.ckpt"), victim = dir.file("victim.txt");
  std::ofstream(victim) << "precious data";
  fs::create_symlink(victim, OutputLock::lock_path(save));
  std::string message;
  try {
    OutputLock lock("train_cifar", "--save", save);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("cannot create its lock file " + OutputLock::lock_path(save) +
                         " (it is a symbolic link; remove it)"),
            std::string::npos)
      << message;
  std::ifstream in(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "precious data");
}

}  // namespace
}  // namespace tandem::apps
