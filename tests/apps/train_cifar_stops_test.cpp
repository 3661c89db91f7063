// train_cifar as a user runs it, when the run does not go as planned: bad input, --help and
// --version, warnings before the first step, a diverging loss, an interrupt or a scheduler's stop.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/device_runtime.h"
#include "tests/apps/train_cifar_runs.h"
#include "tests/support/cuda_skip.h"
#include "tests/support/run_program.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_paths.h"

namespace tandem::apps {
namespace {

using nlohmann::json;
using testing::ProgramRun;
using testing::TempDir;

TEST(TrainCifar, BadInputGetsOneClearLine) {
  expect_one_error_line(train_cifar({"--bogus"}), "--bogus: unknown flag (see --help)");
  // Flag errors say what is allowed (the UX review's cases 1-4).
  expect_one_error_line(train_cifar({"--epoch", "2"}),
                        "--epoch: unknown flag; did you mean --epochs?");
  expect_one_error_line(train_cifar({"--batch_size", "64"}),
                        "--batch_size: unknown flag; did you mean --batch-size?");
  expect_one_error_line(train_cifar({"--lr", "-0.1"}), "--lr: must be > 0, got -0.1");
  expect_one_error_line(train_cifar({"--lr", "abc"}), "--lr: must be a number > 0, got 'abc'");
  // tandem-run would have run "--nproc" as the program (the review's case 56).
  const ProgramRun launcher =
      testing::run_program(testing::kTandemRunProgram, {"--nproc", "2", "--", "true"});
  EXPECT_NE(launcher.exit_code, 0);
  EXPECT_EQ(launcher.output,
            "tandem-run: error: --nproc: unknown flag; did you mean --nproc-per-node?; "
            "the program to run goes after -- (see --help)\n");
  // The review's cases 57 (accepted silently) and 51 (a file that exists called missing).
  const ProgramRun grace =
      testing::run_program(testing::kTandemRunProgram, {"--kill-grace", "-1", "--", "true"});
  EXPECT_EQ(grace.output, "tandem-run: error: --kill-grace: must be >= 0, got -1 (see --help)\n");
  TempDir dir;
  { std::ofstream(dir.file("notes.txt")) << "text\n"; }
  const ProgramRun not_executable =
      testing::run_program(testing::kTandemRunProgram, {"--", dir.file("notes.txt")});
  EXPECT_NE(not_executable.output.find("notes.txt: not executable (chmod +x"), std::string::npos)
      << not_executable.output;
  expect_one_error_line(train_cifar({"--seed", "-1"}), "--seed: must be >= 0, got -1");
  expect_one_error_line(train_cifar({"--data-dir", "/nonexistent"}),
                        "no CIFAR-10 at /nonexistent: run scripts/get_cifar10.sh");
  expect_one_error_line(train_cifar({"--synthetic", "--mode", "dp", "--devices",
                                     "cpu:0,cpu:1,cpu:2", "--batch-size", "2"}),
                        "--batch-size 2 is smaller than the 3 devices");
  expect_one_error_line(train_cifar({"--synthetic", "--mode", "dp", "--devices", "cuda:7"}),
                        cuda_available() ? "cuda:7" : cuda_unavailable_reason());
  if (!cuda_available()) {  // the UX review's case 33: and what to write instead
    expect_one_error_line(train_cifar({"--synthetic", "--devices", "cuda:0"}),
                          "--devices cuda:0 names a GPU, but " + cuda_unavailable_reason() +
                              "; use cpu:0, or leave --devices out");
  }
  expect_one_error_line(train_cifar({"--eval-only"}), "--eval-only needs a checkpoint");
  // Said once, by the process that would start the ranks, with the sizes that do split (case 13).
  expect_one_error_line(train_cifar({"--synthetic", "--mode", "ddp", "--nproc", "3", "--backend",
                                     "gloo", "--batch-size", "128"}),
                        "--batch-size 128 does not split evenly over 3 ranks; use 126 or 129");
  // More NCCL ranks than visible GPUs, on any machine: one line before any rank starts.
  const int visible = cuda_available() ? cuda_runtime().device_count() : 0;
  const std::string ranks = std::to_string(visible + 2);
  expect_one_error_line(
      train_cifar({"--synthetic", "--mode", "ddp", "--backend", "nccl", "--nproc", ranks}),
      "[ddp] " + ranks + " ranks on this node need " + ranks + " GPUs, " + std::to_string(visible) +
          (visible == 1 ? " is" : " are") + " visible; use --backend gloo to run them on CPUs");
  expect_one_error_line(train_cifar({"--synthetic", "--devices", "cpu:0,cpu:1"}),
                        "--devices cpu:0,cpu:1 lists several devices, which only --mode dp uses");
  expect_one_error_line(train_cifar({"--synthetic", "--resume", dir.file("missing.ckpt")}),
                        "missing.ckpt");
}

TEST(TrainCifar, HelpExplainsTheFlagsWithTheirDefaults) {
  const ProgramRun run = train_cifar({"--help"});
  EXPECT_EQ(run.exit_code, 0);
  for (const char* text : {"--mode", "--bucket-cap-mb", "=25", "--devices", "--nproc", "--log-json",
                           "--resume", "=resnet20", "=multistep"}) {
    EXPECT_NE(run.output.find(text), std::string::npos) << text;
  }
  EXPECT_EQ(run.output.find("{false}"), std::string::npos) << run.output;  // a CLI11 artefact
}

TEST(TrainCifar, VersionSaysTheVersionAndTheCommit) {
  for (const char* program :
       {testing::kTrainCifarProgram, testing::kBenchCifarProgram, testing::kTandemRunProgram}) {
    const ProgramRun run = testing::run_program(program, {"--version"});
    EXPECT_EQ(run.exit_code, 0) << program << ": " << run.output;
    EXPECT_NE(run.output.find(" 0.1.0 (commit "), std::string::npos)
        << program << ": " << run.output;
    EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << run.output;
  }
}

// The UX review's cases 41 and 42: runs that work but far slower or noisier than expected say so
// once, before the first step.
TEST(TrainCifar, MoreThreadsThanCoresAreWarnedOf) {
  TempDir dir;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const ProgramRun run = train_cifar(
      quick_run(dir.file("log.jsonl"), {"--epochs", "1", "--threads", std::to_string(4 * cores)}));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("train_cifar: warning: " + std::to_string(4 * cores) + " threads on " +
                            std::to_string(cores) + " core"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(run.output.find("images on one device"), std::string::npos) << run.output;
}

// The README's promise holds in every mode: one device's whole batch of a few images too.
TEST(TrainCifar, AFewImagesInSingleModeAreWarnedOfOnce) {
  TempDir dir;
  const ProgramRun run =
      train_cifar(quick_run(dir.file("log.jsonl"), {"--epochs", "1", "--batch-size", "4"}));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string warning =
      "train_cifar: warning: --batch-size 4 is 4 images on one device: batch-norm statistics of "
      "so few are noisy (raise --batch-size)";
  const size_t first = run.output.find(warning);
  EXPECT_NE(first, std::string::npos) << run.output;
  EXPECT_EQ(run.output.find(warning, first + 1), std::string::npos) << run.output;
}

TEST(TrainCifarMultiprocess, AFewImagesPerRankAreWarnedOfOnce) {
  TempDir dir;
  std::vector<std::string> args =
      quick_run(dir.file("log.jsonl"), {"--epochs", "1", "--batch-size", "8", "--mode", "ddp",
                                        "--backend", "gloo", "--nproc", "2", "--threads", "1"});
  const ProgramRun run = train_cifar(args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string warning = "train_cifar: warning: --batch-size 8 over 2 ranks is 4 images each";
  const size_t first = run.output.find(warning);
  EXPECT_NE(first, std::string::npos) << run.output;
  EXPECT_EQ(run.output.find(warning, first + 1), std::string::npos) << run.output;  // rank 0 only
}

TEST(TrainCifar, DivergingLossStopsWithTheStep) {
  TempDir dir;
  const ProgramRun run =
      train_cifar(quick_run(dir.file("log.jsonl"), {"--lr", "1e30", "--epochs", "1"}));
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("train_cifar: error: the loss "), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("at epoch 1, step"), std::string::npos) << run.output;
  // A finite loss that grows without bound (the review's case 43: 10^16 and exit 0 before).
  const ProgramRun diverging =
      train_cifar(quick_run(dir.file("log2.jsonl"), {"--lr", "100", "--epochs", "3"}));
  EXPECT_NE(diverging.exit_code, 0) << diverging.output;
  EXPECT_NE(diverging.output.find("train_cifar: error: the loss diverged to "), std::string::npos)
      << diverging.output;
}

// Starts a long run, sends `sig` once its first epoch is logged (and so checkpointed, with
// --save), and returns its exit status.
int stopped_by(int sig, const std::vector<std::string>& args, const std::string& log,
               const std::string& output) {
  const pid_t pid = start_train_cifar(args, output);
  if (pid < 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (epochs_of(read_log(log)).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, sig);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(TrainCifar, InterruptStopsCleanlyAndKeepsTheLastCheckpoint) {
  TempDir dir;
  const std::string log = dir.file("log.jsonl"), checkpoint = dir.file("run.ckpt");
  EXPECT_EQ(stopped_by(SIGINT, quick_run(log, {"--epochs", "100", "--save", checkpoint}), log,
                       dir.file("out.txt")),
            128 + SIGINT);
  const auto log_records = read_log(log);
  ASSERT_FALSE(log_records.empty());
  EXPECT_EQ(log_records.back()["type"], "summary");
  EXPECT_TRUE(log_records.back()["interrupted"].get<bool>());
  const ProgramRun eval =
      train_cifar(quick_run(dir.file("eval.jsonl"), {"--resume", checkpoint, "--eval-only"}));
  EXPECT_EQ(eval.exit_code, 0) << eval.output;
}

// Interrupted in the first epoch with --save: no checkpoint exists yet, so the lines say so
// rather than promising one, report no accuracy, and offer no "continue:" from nothing.
TEST(TrainCifar, AnInterruptBeforeTheFirstSaveSaysNothingWasSavedYet) {
  TempDir dir;
  const std::string output = dir.file("out.txt");
  const pid_t pid = start_train_cifar(
      quick_run(dir.file("log.jsonl"), {"--subset", "5000", "--save", dir.file("run.ckpt")}),
      output);
  ASSERT_GT(pid, 0);
  const auto read_output = [&] {
    std::ifstream in(output);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (read_output().find("epoch 1/10 ") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGINT);  // after the first progress line: training, long before the epoch's end
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 128 + SIGINT);
  const std::string text = read_output();
  EXPECT_NE(text.find("interrupted during epoch 1; nothing was saved yet (--save writes at the "
                      "end of each epoch)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("done: no epoch finished in this run"), std::string::npos) << text;
  EXPECT_EQ(text.find("continue:"), std::string::npos) << text;
}

// SIGTERM (a scheduler's stop) exits 143 in every mode, as under tandem-run; without --save the
// last line says that nothing was saved instead of promising a checkpoint.
TEST(TrainCifar, SigtermStopsWith143AndSaysWhenNothingWasSaved) {
  TempDir dir;
  const std::string log = dir.file("log.jsonl");
  EXPECT_EQ(stopped_by(SIGTERM, quick_run(log, {"--epochs", "100"}), log, dir.file("out.txt")),
            128 + SIGTERM);
  std::ifstream in(dir.file("out.txt"));
  const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(output.find("; nothing was saved (no --save)"), std::string::npos) << output;
}

}  // namespace
}  // namespace tandem::apps
