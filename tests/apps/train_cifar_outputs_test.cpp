// train_cifar's outputs are its own (the UX trial of 2026-11-27, its three "bad" cases): a --save
// that is not a regular file, outputs that are one file, two runs on one --save, and a new run over
// an earlier run's checkpoint are each refused in one line before the first step, leaving what was
// there as it was.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "apps/common/output_lock.h"
#include "tests/apps/train_cifar_runs.h"
#include "tests/support/temp_dir.h"

namespace tandem::apps {
namespace {

namespace fs = std::filesystem;
using testing::ProgramRun;
using testing::TempDir;

TEST(TrainCifarRefusals, OutputsThatAreNotRegularFilesOrOneFileAreRefused) {
  TempDir dir;
  const std::string save = dir.file("run.ckpt");
  ASSERT_EQ(::mkfifo(dir.file("pipe").c_str(), 0600), 0);
  expect_one_error_line(train_cifar(quick_run(dir.file("log.jsonl"), {"--save", dir.file("pipe")})),
                        "--save " + dir.file("pipe") + ": is not a regular file");
  fs::create_symlink(dir.file("elsewhere.state"), save + ".state");
  expect_one_error_line(train_cifar(quick_run(dir.file("log.jsonl"), {"--save", save})),
                        "--save " + save + ".state: is a symbolic link");
  fs::remove(save + ".state");
  expect_one_error_line(train_cifar(quick_run(save, {"--save", save})),
                        "--log-json " + save + " is also --save (" + save +
                            "), which would overwrite it: give each output its own file");
  expect_one_error_line(train_cifar(quick_run(save + ".state", {"--save", save})),
                        "--log-json " + save + ".state is also --save's sidecar");
  EXPECT_TRUE(fs::is_fifo(dir.file("pipe")));
  EXPECT_FALSE(fs::exists(dir.file("log.jsonl")));  // refused before the log was written
}

// Note [One writer per output]: the second run stops before it trains, naming the first.
TEST(TrainCifarRefusals, ASecondRunOnTheSameSaveStopsBeforeTraining) {
  TempDir dir;
  const std::string save = dir.file("run.ckpt");
  const pid_t first = start_train_cifar(
      quick_run(dir.file("first.jsonl"), {"--epochs", "1000", "--save", save}), dir.file("out"));
  ASSERT_GT(first, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(OutputLock::lock_path(save)) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string holder = "pid " + std::to_string(first);
  const ProgramRun same_save =
      train_cifar(quick_run(dir.file("second.jsonl"), {"--save", save, "--resume", "auto"}));
  expect_one_error_line(same_save, "--save " + save + " is being written by another run (host ");
  EXPECT_NE(same_save.output.find(holder), std::string::npos) << same_save.output;
  const ProgramRun same_log =
      train_cifar(quick_run(dir.file("first.jsonl"), {"--save", dir.file("other.ckpt")}));
  expect_one_error_line(
      same_log, "--log-json " + dir.file("first.jsonl") + " is being written by another run");
  kill(first, SIGKILL);  // a crash: the kernel drops the lock with the process
  int status = 0;
  waitpid(first, &status, 0);
  EXPECT_FALSE(fs::exists(dir.file("second.jsonl")));
  const ProgramRun after = train_cifar(
      quick_run(dir.file("second.jsonl"), {"--epochs", "1", "--save", save, "--overwrite"}));
  EXPECT_EQ(after.exit_code, 0) << after.output;
  EXPECT_FALSE(fs::exists(OutputLock::lock_path(save)));  // a clean exit removes it
}

// Note [New run, old checkpoint]: --resume auto continues it, --overwrite starts afresh over it.
TEST(TrainCifarRefusals, ANewRunOverAnEarlierCheckpointNeedsOverwrite) {
  TempDir dir;
  const std::string save = dir.file("run.ckpt"), log = dir.file("log.jsonl");
  const std::vector<std::string> run = quick_run(log, {"--epochs", "1", "--save", save});
  ASSERT_EQ(train_cifar(run).exit_code, 0);
  const std::string first_log = contents(log);
  // Another log, so that the checkpoint is what is refused (a log of an earlier run is too:
  // ALogOfAnEarlierRunOrNotAFileIsRefused).
  expect_one_error_line(
      train_cifar(quick_run(dir.file("other.jsonl"), {"--epochs", "1", "--save", save})),
      "--save " + save +
          " holds the checkpoint of an earlier run, which this run "
          "would replace: add --resume auto to continue it, or --overwrite");
  EXPECT_EQ(contents(log), first_log);  // the earlier run's log too is as it was
  std::vector<std::string> continued = run;
  continued.insert(continued.end(), {"--epochs", "2", "--resume", "auto"});
  const ProgramRun resumed = train_cifar(continued);
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(epochs_of(read_log(log)).size(), 2u);
  std::vector<std::string> afresh = run;
  afresh.push_back("--overwrite");
  const ProgramRun overwritten = train_cifar(afresh);
  EXPECT_EQ(overwritten.exit_code, 0) << overwritten.output;
  EXPECT_EQ(epochs_of(read_log(log)).size(), 1u);
}

// Note [Logs are outputs too]: a log holding another run's records needs --overwrite (or
// --resume); a FIFO, which would block the run at its first record, and a device are refused by
// what they are, at once.
TEST(TrainCifarRefusals, ALogOfAnEarlierRunOrNotAFileIsRefused) {
  TempDir dir;
  const std::string log = dir.file("log.jsonl");
  const std::vector<std::string> run = quick_run(log, {"--epochs", "1"});
  ASSERT_EQ(train_cifar(run).exit_code, 0);
  const std::string first_log = contents(log);
  expect_one_error_line(train_cifar(run), "--log-json " + log +
                                              " holds the log of an earlier run, which this "
                                              "run would replace");
  EXPECT_EQ(contents(log), first_log);
  std::vector<std::string> afresh = run;
  afresh.push_back("--overwrite");
  const ProgramRun replaced = train_cifar(afresh);
  EXPECT_EQ(replaced.exit_code, 0) << replaced.output;
  EXPECT_EQ(epochs_of(read_log(log)).size(), 1u);

  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  expect_one_error_line(train_cifar(quick_run(dir.file("fifo"))),
                        "--log-json " + dir.file("fifo") + " is a FIFO (named pipe)");
  expect_one_error_line(train_cifar(quick_run("/dev/null")),
                        "--log-json /dev/null is a character device");
}

}  // namespace
}  // namespace tandem::apps
