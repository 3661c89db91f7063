// A rank waiting for the others (the UX review's cases 69 and 73): it says whom it waits for
// instead of staying silent for the whole --timeout, gives up in one line naming the missing
// rank, and a Ctrl-C meanwhile ends it at once (Note [Waiting for ranks]).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "tests/apps/train_cifar_runs.h"
#include "tests/support/free_port.h"
#include "tests/support/temp_dir.h"

namespace tandem::apps {
namespace {

using Clock = std::chrono::steady_clock;
using testing::free_port;

// Rank 0 of a job of two whose rank 1 never starts, rank 0 hosting the store.
std::vector<std::string> rank_zero_alone(const std::string& timeout) {
  return {"RANK=0",
          "WORLD_SIZE=2",
          "LOCAL_RANK=0",
          "LOCAL_WORLD_SIZE=2",
          "MASTER_ADDR=127.0.0.1",
          "MASTER_PORT=" + std::to_string(free_port()),
          testing::kTrainCifarProgram,
          "--mode",
          "ddp",
          "--backend",
          "gloo",
          "--synthetic",
          "--subset",
          "64",
          "--epochs",
          "1",
          "--no-progress",
          "--timeout",
          timeout};
}

TEST(TrainCifarRendezvous, ALoneRankSaysWhomItWaitsForAndGivesUpInOneLine) {
  const auto start = Clock::now();
  const testing::ProgramRun run = testing::run_program("/usr/bin/env", rank_zero_alone("3"));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(20));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  // Every second (a third of the timeout), then the error.
  EXPECT_NE(run.output.find("[process_group] rank 0 of 2: waiting for rank 1 to join at "
                            "127.0.0.1:"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("train_cifar: error: [process_group] rank 0 of 2: rank 1 did not "
                            "join within 3 s"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(run.output.find("tandem/world_size"), std::string::npos) << run.output;  // no key
}

TEST(TrainCifarRendezvous, CtrlCWhileWaitingForRanksEndsTheRankAtOnce) {
  testing::TempDir dir;
  std::vector<std::string> command = rank_zero_alone("120");
  const std::string output = dir.file("output.txt");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::freopen(output.c_str(), "w", stdout);
    ::dup2(STDOUT_FILENO, STDERR_FILENO);
    std::vector<char*> argv{const_cast<char*>("/usr/bin/env")};
    for (std::string& arg : command) argv.push_back(arg.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // well inside the rendezvous
  const auto interrupted = Clock::now();
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_LT(Clock::now() - interrupted, std::chrono::seconds(5));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT);
  std::ifstream in(output);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("train_cifar: interrupted before training began; nothing to save"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace tandem::apps
