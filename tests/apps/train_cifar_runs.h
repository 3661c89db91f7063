#pragma once
/// What the tests of train_cifar share: running it, reading its JSON-lines log, a quick run's
/// flags, and checking a one-line error.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/run_program.h"
#include "tests/support/test_paths.h"

namespace tandem::apps {

inline testing::ProgramRun train_cifar(const std::vector<std::string>& args) {
  return testing::run_program(testing::kTrainCifarProgram, args);
}

inline std::vector<nlohmann::json> read_log(const std::string& path) {
  std::vector<nlohmann::json> records;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  return records;
}

inline std::vector<nlohmann::json> records_of(const std::vector<nlohmann::json>& log,
                                              const std::string& type) {
  std::vector<nlohmann::json> out;
  for (const nlohmann::json& record : log) {
    if (record["type"] == type) out.push_back(record);
  }
  return out;
}

inline std::vector<nlohmann::json> epochs_of(const std::vector<nlohmann::json>& log) {
  return records_of(log, "epoch");
}

/// The whole of a file, as bytes ("" when it is missing).
inline std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A short run on learnable synthetic data: 256 images, 8 steps an epoch.
inline std::vector<std::string> quick_run(const std::string& log,
                                          std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"--synthetic", "--subset", "256",           "--batch-size", "32",
                                "--workers",   "1",        "--no-progress", "--log-json",   log};
  if (std::find(extra.begin(), extra.end(), "--lr") == extra.end())
    extra.insert(extra.end(), {"--lr", "0.05"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

/// The epoch records of two runs of one schedule agree in every metric but the timings.
inline void expect_same_epochs(const std::vector<nlohmann::json>& actual,
                               const std::vector<nlohmann::json>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t e = 0; e < actual.size(); ++e) {
    for (const char* key : {"train_loss", "train_accuracy", "test_loss", "test_accuracy", "lr"}) {
      EXPECT_DOUBLE_EQ(actual[e][key].get<double>(), expected[e][key].get<double>())
          << "epoch " << e + 1 << " " << key;
    }
    EXPECT_EQ(actual[e]["step"], expected[e]["step"]);
  }
}

/// Starts train_cifar with `args` in a child process, its stdout (and its stderr too when
/// `with_stderr`) going to the file `output`, and returns at once with its pid (for tests that
/// interrupt or kill it, or run several at once).
inline pid_t start_train_cifar(std::vector<std::string> args, const std::string& output,
                               bool with_stderr = false) {
  args.insert(args.begin(), testing::kTrainCifarProgram);
  const pid_t pid = fork();
  if (pid != 0) return pid;  // the parent, or -1
  std::freopen(output.c_str(), "w", stdout);
  if (with_stderr) dup2(STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  _exit(127);
}

inline void expect_one_error_line(const testing::ProgramRun& run, const std::string& expected) {
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.rfind("train_cifar: error: ", 0), 0u) << run.output;
  EXPECT_NE(run.output.find(expected), std::string::npos) << run.output;
  EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << run.output;
}

}  // namespace tandem::apps
