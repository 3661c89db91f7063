// train_cifar --profile (apps/common/step_profiler.h) as a user runs it: the table on stdout and
// in --profile-dir, beside a Chrome trace; a window that training ends early; a folder that
// cannot be written. (bench_cifar's tests profile a 2-rank DDP job.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/apps/train_cifar_runs.h"
#include "tests/support/temp_dir.h"

namespace tandem::apps {
namespace {

using testing::ProgramRun;
using testing::TempDir;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(TrainCifarProfile, PrintsTheTableAndWritesItWithATrace) {
  TempDir dir;
  const std::string log = dir.file("run.jsonl");
  const ProgramRun run = train_cifar(
      quick_run(log, {"--epochs", "1", "--profile", "3", "--profile-dir", dir.file("prof")}));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // Steps 2, 3 and 4 of the epoch's 8 (Note [Profile window]).
  EXPECT_NE(run.output.find("Profile of 3 steps on thread \"main\""), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("| conv2d_backward_weight "), std::string::npos) << run.output;
  const std::string table = read_text(dir.file("prof/train_cifar.rank0.ops.md"));
  EXPECT_NE(run.output.find(table), std::string::npos) << table;
  const nlohmann::json trace =
      nlohmann::json::parse(read_text(dir.file("prof/train_cifar.rank0.trace.json")));
  std::vector<std::string> steps, threads;
  for (const nlohmann::json& event : trace["traceEvents"]) {
    if (event["name"] == "thread_name") threads.push_back(event["args"]["name"]);
    const std::string name = event["name"];
    if (name.rfind("ProfilerStep#", 0) == 0) steps.push_back(name);
  }
  EXPECT_EQ(steps,
            (std::vector<std::string>{"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"}));
  EXPECT_NE(std::find(threads.begin(), threads.end(), "loader"), threads.end());
  // The summary's GFLOP/s come from ResNet-20's 244 MFLOP per image (Note [Counting FLOPs]).
  EXPECT_NE(run.output.find("GFLOP/s (244 MFLOP per image per step)"), std::string::npos)
      << run.output;
  EXPECT_NEAR(records_of(read_log(log), "summary").at(0)["flops_per_image"].get<double>() / 1e6,
              244.0, 0.05);
}

TEST(TrainCifarProfile, AWindowTrainingEndsEarlyIsWrittenAsFarAsItGot) {
  TempDir dir;
  const ProgramRun run = train_cifar(quick_run(
      dir.file("run.jsonl"), {"--epochs", "1", "--profile", "100", "--profile-dir", dir.path()}));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("Training ended after 6 of the 100 steps to profile."),
            std::string::npos)
      << run.output;
  EXPECT_TRUE(std::filesystem::exists(dir.file("train_cifar.rank0.trace.json")));
}

TEST(TrainCifarProfile, AFolderThatCannotBeWrittenIsOneLine) {
  TempDir dir;
  std::ofstream(dir.file("file")) << "not a folder";
  expect_one_error_line(
      train_cifar(quick_run(dir.file("run.jsonl"),
                            {"--profile", "2", "--profile-dir", dir.file("file/prof")})),
      "--profile: cannot create the folder " + dir.file("file/prof") + ": Not a directory");
}

}  // namespace
}  // namespace tandem::apps
