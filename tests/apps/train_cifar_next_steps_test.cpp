// What the end of a run prints can be pasted as it is (issue #45's trial): the "continue:" and
// "evaluate:" lines run through a shell, in a folder whose name needs quoting; and a resume names
// the pair it was given by either file, blaming a sidecar of another save as such.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/apps/train_cifar_runs.h"
#include "tests/support/temp_dir.h"

namespace tandem::apps {
namespace {

namespace fs = std::filesystem;
using testing::ProgramRun;
using testing::TempDir;

// The rest of the line that starts with `label`, or "".
std::string line_after(const std::string& output, const std::string& label) {
  const size_t at = output.find("\n" + label);
  if (at == std::string::npos) return "";
  const size_t start = at + 1 + label.size();
  return output.substr(start, output.find('\n', start) - start);
}

TEST(TrainCifarNextSteps, ContinueAndEvaluateLinesRunAsPrinted) {
  TempDir dir;
  fs::create_directories(dir.file("it's a run"));
  const std::string save = dir.file("it's a run/run.ckpt"), log = dir.file("it's a run/log.jsonl");
  const ProgramRun first = train_cifar(
      quick_run(log, {"--epochs", "2", "--run-epochs", "1", "--save", save, "--devices", "cpu:0"}));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string again = line_after(first.output, "continue: ");
  const std::string evaluate = line_after(first.output, "evaluate: ");
  ASSERT_FALSE(again.empty()) << first.output;
  EXPECT_NE(evaluate.find(" --synthetic --subset 256"), std::string::npos) << evaluate;
  const std::string plot = line_after(first.output, "plot:     ");
  EXPECT_NE(plot.find("'"), std::string::npos) << first.output;
  // The script by its absolute path (a build folder of the checkout), so it runs from anywhere.
  EXPECT_EQ(plot.rfind("/", 0), 0u) << plot;
  EXPECT_NE(plot.find("/scripts/plot_training.py "), std::string::npos) << plot;
  const ProgramRun continued = testing::run_program("/bin/sh", {"-c", again});
  ASSERT_EQ(continued.exit_code, 0) << again << "\n" << continued.output;
  EXPECT_EQ(epochs_of(read_log(log)).size(), 2u);
  const ProgramRun evaluated = testing::run_program("/bin/sh", {"-c", evaluate});
  EXPECT_EQ(evaluated.exit_code, 0) << evaluate << "\n" << evaluated.output;
  EXPECT_NE(evaluated.output.find("test: loss"), std::string::npos) << evaluated.output;
}

// Without --log-json the "written:" line names the checkpoint pair and nothing after it (it once
// ended in the quoted empty log path, '').
TEST(TrainCifarNextSteps, WithoutAMetricsLogTheWrittenLineNamesOnlyTheCheckpoint) {
  TempDir dir;
  const std::string save = dir.file("run.ckpt");
  const ProgramRun run = testing::run_program(
      testing::kTrainCifarProgram,
      {"--synthetic", "--subset", "64", "--batch-size", "32", "--workers", "1", "--no-progress",
       "--epochs", "1", "--save", save, "--devices", "cpu:0"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(line_after(run.output, "written:  "), save + " and " + save + ".state (the checkpoint)")
      << run.output;
  EXPECT_EQ(run.output.find("\nplot:"), std::string::npos) << run.output;
}

TEST(TrainCifarNextSteps, AResumeKnowsThePairByEitherFileAndItsForeignSidecar) {
  TempDir dir;
  const std::string a = dir.file("a.ckpt"), b = dir.file("b.ckpt");
  ASSERT_EQ(train_cifar(quick_run(dir.file("a.jsonl"), {"--epochs", "1", "--save", a})).exit_code,
            0);
  ASSERT_EQ(
      train_cifar(quick_run(dir.file("b.jsonl"), {"--epochs", "1", "--save", b, "--lr", "0.1"}))
          .exit_code,
      0);
  // By its sidecar: the same as by its weights.
  const ProgramRun by_sidecar = train_cifar(
      quick_run(dir.file("a.jsonl"), {"--epochs", "2", "--resume", a + ".state", "--save", a}));
  EXPECT_EQ(by_sidecar.exit_code, 0) << by_sidecar.output;
  EXPECT_EQ(epochs_of(read_log(dir.file("a.jsonl"))).size(), 2u);
  // b's sidecar beside a's weights: not "trained with --lr 0.1", but two saves.
  fs::copy_file(b + ".state", dir.file("c.ckpt.state"));
  fs::copy_file(a, dir.file("c.ckpt"));
  expect_one_error_line(train_cifar(quick_run(dir.file("c.jsonl"),
                                              {"--epochs", "3", "--resume", dir.file("c.ckpt")})),
                        "come from different saves");
}

}  // namespace
}  // namespace tandem::apps
