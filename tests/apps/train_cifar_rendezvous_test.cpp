// A rank waiting for the others (the UX review's cases 69 and 73): it says whom it waits for
// instead of staying silent for the whole --timeout, gives up in one line naming the missing
// rank, and a Ctrl-C meanwhile ends it at once (Note [Waiting for ranks]). Ranks started by hand
// without a launcher (--init-method tcp:// and file://, --rank, --world-size) train as the
// launcher's ranks do, and a file:// left by a crashed job is refused in one line.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
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

// A ddp job of 2 on synthetic data, 2 steps: rank 0 writes `log`.
std::vector<std::string> small_job(const std::string& log) {
  std::vector<std::string> args{"--mode", "ddp", "--backend", "gloo", "--threads", "1"};
  args.insert(args.end(), {"--synthetic", "--subset", "64", "--batch-size", "32", "--seed", "5"});
  args.insert(args.end(), {"--epochs", "1", "--workers", "0", "--no-progress", "--timeout", "30"});
  args.insert(args.end(), {"--log-json", log});
  return args;
}

struct RankRun {
  int exit_code = -1;  ///< 124 when it had to be killed
  std::string output;
};

// Starts train_cifar once per argument list, at once, each its stdout and stderr into a file of
// `dir`, and waits for all (killing any still running after `limit`).
std::vector<RankRun> run_ranks(const std::vector<std::vector<std::string>>& ranks,
                               const testing::TempDir& dir, std::chrono::seconds limit) {
  std::vector<pid_t> pids;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::string output = dir.file("rank" + std::to_string(r) + ".txt");
    pids.push_back(start_train_cifar(ranks[r], output, true));
  }
  std::vector<RankRun> runs(ranks.size());
  const auto deadline = Clock::now() + limit;
  for (size_t r = 0; r < ranks.size(); ++r) {
    int status = 0;
    while (::waitpid(pids[r], &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], &status, 0);
        runs[r].exit_code = 124;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (runs[r].exit_code != 124) runs[r].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream in(dir.file("rank" + std::to_string(r) + ".txt"));
    runs[r].output.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return runs;
}

// The two ranks of small_job started by hand at `init_method`.
std::vector<RankRun> run_by_hand(const std::string& init_method, const std::string& log,
                                 const testing::TempDir& dir) {
  std::vector<std::vector<std::string>> ranks;
  for (const char* rank : {"0", "1"}) {
    std::vector<std::string> args = small_job(log);
    args.insert(args.end(), {"--init-method", init_method, "--rank", rank, "--world-size", "2"});
    ranks.push_back(args);
  }
  return run_ranks(ranks, dir, std::chrono::seconds(120));
}

TEST(TrainCifarRendezvous, RanksStartedByHandOverTcpAndFileTrainAsTheLaunchersDo) {
  testing::TempDir dir;
  std::vector<std::string> launched = small_job(dir.file("launched.jsonl"));
  launched.insert(launched.end(), {"--nproc", "2"});
  const testing::ProgramRun reference = train_cifar(launched);
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const auto expected = epochs_of(read_log(dir.file("launched.jsonl")));
  ASSERT_EQ(expected.size(), 1u);

  const std::string tcp = "tcp://127.0.0.1:" + std::to_string(free_port());
  const std::string file = "file://" + dir.file("rendezvous");
  for (const std::string& init_method : {tcp, file}) {
    SCOPED_TRACE(init_method);
    const std::string log = dir.file("by_hand.jsonl");
    std::filesystem::remove(log);
    const std::vector<RankRun> runs = run_by_hand(init_method, log, dir);
    for (const RankRun& run : runs) EXPECT_EQ(run.exit_code, 0) << run.output;
    expect_same_epochs(epochs_of(read_log(log)), expected);
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("rendezvous")));  // the last rank out removed it
}

TEST(TrainCifarRendezvous, AFileLeftByACrashedJobIsRefusedInOneLine) {
  testing::TempDir dir;
  const std::string path = dir.file("rendezvous");
  std::vector<std::string> rank0 = small_job(dir.file("log.jsonl"));
  rank0.insert(rank0.end(),
               {"--init-method", "file://" + path, "--rank", "0", "--world-size", "2"});
  // Rank 0 of an earlier job, killed while it waits for rank 1: its file stays.
  const pid_t crashed = start_train_cifar(rank0, dir.file("crashed.txt"));
  ASSERT_GT(crashed, 0);
  const auto start = Clock::now();
  while (!std::filesystem::exists(path) && Clock::now() - start < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(crashed, SIGKILL);
  ::waitpid(crashed, nullptr, 0);
  ASSERT_TRUE(std::filesystem::exists(path));

  expect_one_error_line(train_cifar(rank0), "[store] file://" + path +
                                                " already exists (made by rank 0 (pid " +
                                                std::to_string(crashed) + ") on host ");
  expect_one_error_line(train_cifar(rank0), "; remove it if no job uses it (rm " + path + ")");
  std::vector<std::string> rank1 = rank0;
  rank1[rank1.size() - 3] = "1";  // --rank 1
  expect_one_error_line(
      train_cifar(rank1),
      "[store] file://" + path + " was refused by rank 0, which found it already there (made by");
}

}  // namespace
}  // namespace tandem::apps
