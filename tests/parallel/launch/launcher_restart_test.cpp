// tandem-run --max-restarts: on one node through launch(), and across two nodes through two
// tandem-run programs on this machine (Note [Restart rounds]).

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include "parallel/launch/launcher.h"
#include "parallel/launch/worker_process.h"
#include "tests/parallel/launch/launcher_fixture.h"
#include "tests/support/error_message.h"
#include "tests/support/free_port.h"
#include "tests/support/run_program.h"
#include "tests/support/test_paths.h"

extern char** environ;

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;
using tandem::testing::contains;
using tandem::testing::error_message;
using tandem::testing::free_port;

size_t count_of(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

// Prints its attempt; rank 1 fails (status 3) on the attempts below `fail_until`, once rank 0
// has printed its attempt too (a marker file in `dir`); rank 0 would sleep for a minute meanwhile.
std::string failing_until(int fail_until, const std::string& dir) {
  const std::string marker = dir + "/printed$TORCHELASTIC_RESTART_COUNT";
  const std::string below =
      "[ $TORCHELASTIC_RESTART_COUNT -lt " + std::to_string(fail_until) + " ]";
  return "echo attempt=$TORCHELASTIC_RESTART_COUNT; if " + below +
         "; then if [ $RANK = 1 ]; then " + "while [ ! -e " + marker +
         " ]; do sleep 0.01; done; exit 3; fi; touch " + marker +
         "; exec sleep 60; fi; echo finished";
}

TEST_F(LauncherTest, RestartsEveryWorkerUntilAnAttemptSucceeds) {
  LaunchOptions options = shell(2, failing_until(2, dir_.path().string()));
  options.max_restarts = 2;
  const auto result = run(options);
  const std::string text = output();
  EXPECT_EQ(result.exit_code, 0) << text;
  EXPECT_EQ(result.restarts, 2);
  for (const std::string rank : {"0", "1"}) {
    const std::string p = "[rank " + rank + "] ";
    const size_t first = text.find(p + "attempt=0\n"), second = text.find(p + "attempt=1\n"),
                 third = text.find(p + "attempt=2\n");
    ASSERT_NE(third, std::string::npos) << text;
    EXPECT_LT(first, second) << text;
    EXPECT_LT(second, third) << text;
    EXPECT_EQ(count_of(text, p + "finished"), 1u) << text;
  }
  EXPECT_EQ(count_of(text, "exited with status 3; restarting all workers (restart 1 of 2)"), 1u)
      << text;
  EXPECT_EQ(count_of(text, "exited with status 3; restarting all workers (restart 2 of 2)"), 1u)
      << text;
  EXPECT_TRUE(result.message.empty()) << result.message;
}

TEST_F(LauncherTest, GivesUpAfterMaxRestarts) {
  LaunchOptions options = shell(2, failing_until(1000, dir_.path().string()));
  options.max_restarts = 2;
  const auto result = run(options);
  const std::string text = output();
  EXPECT_EQ(result.exit_code, 3) << text;
  EXPECT_EQ(result.restarts, 2);
  EXPECT_TRUE(contains(result.message, "[tandem-run] rank 1 (local rank 1, pid ")) << text;
  EXPECT_TRUE(
      contains(result.message, "exited with status 3; gave up after 2 restarts (--max-restarts 2)"))
      << result.message;
  EXPECT_EQ(count_of(text, "gave up after 2 restarts"), 1u) << text;
  EXPECT_EQ(count_of(text, "restarting all workers"), 2u) << text;
  EXPECT_EQ(count_of(text, "[rank 0] attempt="), 3u) << text;
}

TEST_F(LauncherTest, NoMaxRestartsStopsAtTheFirstFailureAsBefore) {
  const auto result = run(shell(2, failing_until(1000, dir_.path().string())));
  const std::string text = output();
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.restarts, 0);
  EXPECT_TRUE(contains(result.message, "exited with status 3; stopping the other workers"))
      << result.message;
  EXPECT_FALSE(contains(text, "restart")) << text;
  EXPECT_EQ(count_of(text, "[rank 0] attempt=0\n"), 1u) << text;  // torchrun's variable, as 0
}

TEST_F(LauncherTest, TheLaunchersOwnInterruptIsNotRestarted) {
  const std::string ready = dir_.file("ready");
  LaunchOptions options = shell(2,
                                "echo attempt=$TORCHELASTIC_RESTART_COUNT; trap 'exit 7' INT; "
                                "touch " +
                                    ready + "$RANK; sleep 60 & wait");
  options.max_restarts = 3;
  std::thread interrupter = interrupt_when_ready(ready);
  const auto result = run(options);
  interrupter.join();
  const std::string text = output();
  EXPECT_EQ(result.exit_code, 128 + SIGINT) << text;
  EXPECT_EQ(result.restarts, 0);
  EXPECT_TRUE(contains(result.message, "[tandem-run] interrupted by")) << result.message;
  EXPECT_FALSE(contains(text, "restarting")) << text;
  EXPECT_EQ(count_of(text, "[rank 0] attempt="), 1u) << text;
}

TEST_F(LauncherTest, ATimeoutIsNotRestarted) {
  LaunchOptions options = shell(2, "exec sleep 60");
  options.max_restarts = 3;
  options.timeout = 500ms;
  const auto result = run(options);
  EXPECT_EQ(result.exit_code, 124);
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.restarts, 0);
  EXPECT_FALSE(contains(output(), "restarting")) << output();
}

TEST_F(LauncherTest, MaxRestartsNeedsTheLauncherHostedStore) {
  LaunchOptions options = shell(1, "true");
  options.max_restarts = 1;
  options.host_store = false;
  EXPECT_TRUE(contains(error_message([&] { launch(options); }),
                       "[tandem-run] --max-restarts needs the launcher-hosted store"));
  options = shell(1, "true");
  options.max_restarts = -1;
  EXPECT_TRUE(contains(error_message([&] { launch(options); }),
                       "[tandem-run] --max-restarts must be at least 0, got -1"));
}

// --- two nodes: two tandem-run programs on this machine, meeting on loopback

class TwoNodeRestartMultiprocess : public ::testing::Test {
 protected:
  // Starts tandem-run as node `node` of two, its output (both streams) going to `log`.
  std::unique_ptr<WorkerProcess> start_node(int node, const std::string& script,
                                            const std::string& log) {
    const std::string launcher =
        testing::shell_quoted(testing::kTandemRunProgram) + " --nnodes 2 --node-rank " +
        std::to_string(node) + " --master-addr 127.0.0.1 --master-port " + std::to_string(port_) +
        " --max-restarts 3 --rdzv-timeout 60 --kill-grace 2 -- /bin/sh -c " +
        testing::shell_quoted(script);
    std::vector<std::string> environment;
    for (char** entry = environ; *entry != nullptr; ++entry) environment.emplace_back(*entry);
    return std::make_unique<WorkerProcess>(
        std::vector<std::string>{"/bin/sh", "-c",
                                 "exec " + launcher + " > " + testing::shell_quoted(log) + " 2>&1"},
        environment);
  }
  // The launcher's exit status; -1 (after killing it) when it runs past `limit`.
  static int wait_for(WorkerProcess& node, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!node.poll_exit()) {
      if (std::chrono::steady_clock::now() >= deadline) {
        node.signal(SIGKILL);
        return -1;
      }
      std::this_thread::sleep_for(20ms);
    }
    return WIFEXITED(node.wait_status()) ? WEXITSTATUS(node.wait_status()) : -1;
  }
  std::string read(const std::string& name) const {
    std::ifstream in(dir_.file(name));
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  tandem::testing::TempDir dir_;
  int port_ = free_port();
};

// Node 1's worker fails in attempt 0 while node 0's would sleep for a minute (as if blocked in a
// collective): both nodes stop and start attempt 1 together, within seconds.
TEST_F(TwoNodeRestartMultiprocess, AFailureOnOneNodeRestartsBoth) {
  const std::string script =
      "echo attempt=$TORCHELASTIC_RESTART_COUNT; if [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then "
      "if [ $GROUP_RANK = 1 ]; then sleep 1; exit 5; fi; exec sleep 60; fi; echo finished";
  const auto started = std::chrono::steady_clock::now();
  auto node0 = start_node(0, script, dir_.file("node0.log"));
  auto node1 = start_node(1, script, dir_.file("node1.log"));
  EXPECT_EQ(wait_for(*node1, 50s), 0) << read("node1.log");
  EXPECT_EQ(wait_for(*node0, 50s), 0) << read("node0.log");
  EXPECT_LT(std::chrono::steady_clock::now() - started, 30s);  // not after node 0's minute
  const std::string log0 = read("node0.log"), log1 = read("node1.log");
  EXPECT_TRUE(contains(log0, "[rank 0] attempt=1\n[rank 0] finished")) << log0;
  EXPECT_TRUE(contains(log1, "[rank 1] attempt=1\n[rank 1] finished")) << log1;
  EXPECT_TRUE(contains(log1, "exited with status 5; restarting all workers (restart 1 of 3)"))
      << log1;
  EXPECT_TRUE(
      contains(log0, "another node ended attempt 0; restarting all workers (restart 1 of 3)"))
      << log0;
}

// Node 1's launcher is killed (its worker dies with it) and started again by hand: it finds
// attempt 0 running without it and closes it, so both nodes run attempt 1 to the end.
TEST_F(TwoNodeRestartMultiprocess, ANodeStartedAgainByHandRejoins) {
  const std::string script =
      "echo attempt=$TORCHELASTIC_RESTART_COUNT; if [ "
      "$TORCHELASTIC_RESTART_COUNT = 0 ]; then touch " +
      dir_.file("started") + "$GROUP_RANK; exec sleep 60; fi; echo finished";
  auto node0 = start_node(0, script, dir_.file("node0.log"));
  auto node1 = start_node(1, script, dir_.file("node1.log"));
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while ((::access(dir_.file("started0").c_str(), F_OK) != 0 ||
          ::access(dir_.file("started1").c_str(), F_OK) != 0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  node1->signal(SIGKILL);
  EXPECT_EQ(wait_for(*node1, 10s), -1);  // killed
  auto again = start_node(1, script, dir_.file("node1-again.log"));
  EXPECT_EQ(wait_for(*again, 50s), 0) << read("node1-again.log");
  EXPECT_EQ(wait_for(*node0, 50s), 0) << read("node0.log");
  const std::string log0 = read("node0.log"), again1 = read("node1-again.log");
  EXPECT_TRUE(contains(log0, "another node ended attempt 0")) << log0;
  EXPECT_TRUE(contains(log0, "[rank 0] attempt=1\n[rank 0] finished")) << log0;
  EXPECT_TRUE(contains(again1, "[rank 1] attempt=1\n[rank 1] finished")) << again1;
}

// Note [Node claims]: a third launcher given --node-rank 1 is refused in one line naming both,
// and the job of the first two runs to the end (it used to run duplicates as 1-node jobs).
TEST_F(TwoNodeRestartMultiprocess, ASecondLauncherWithTheSameNodeRankIsRefused) {
  const std::string script =
      "touch " + dir_.file("started") + "$GROUP_RANK; sleep 8; echo finished";
  auto node0 = start_node(0, script, dir_.file("node0.log"));
  auto node1 = start_node(1, script, dir_.file("node1.log"));
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (::access(dir_.file("started1").c_str(), F_OK) != 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  auto twin = start_node(1, script, dir_.file("twin.log"));
  EXPECT_EQ(wait_for(*twin, 20s), 1) << read("twin.log");
  EXPECT_EQ(wait_for(*node1, 50s), 0) << read("node1.log");
  EXPECT_EQ(wait_for(*node0, 50s), 0) << read("node0.log");
  const std::string log = read("twin.log");
  EXPECT_TRUE(contains(log, "[tandem-run] two launchers claim --node-rank 1: pid ")) << log;
  EXPECT_TRUE(contains(log, " (running) and pid ")) << log;
  EXPECT_EQ(count_of(log, "\n"), 1u) << log;
  EXPECT_TRUE(contains(read("node1.log"), "[rank 1] finished")) << read("node1.log");
}

// Note [Node claims]: node 1's launcher is killed while its worker runs; node 0's worker finishes,
// and node 0 names the lost launcher within seconds (it used to wait --rdzv-timeout, then exit 0
// without a line).
TEST_F(TwoNodeRestartMultiprocess, NodeZeroNamesALostPeerLauncher) {
  const std::string script = "touch " + dir_.file("started") +
                             "$GROUP_RANK; if [ $GROUP_RANK = 1 ]; then exec sleep 60; fi";
  auto node0 = start_node(0, script, dir_.file("node0.log"));
  auto node1 = start_node(1, script, dir_.file("node1.log"));
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (::access(dir_.file("started1").c_str(), F_OK) != 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  const auto killed = std::chrono::steady_clock::now();
  node1->signal(SIGKILL);
  EXPECT_EQ(wait_for(*node0, 40s), 1) << read("node0.log");
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 20s);  // not --rdzv-timeout's 60 s
  EXPECT_TRUE(
      contains(read("node0.log"), "[tandem-run] node 1's launcher was lost during attempt 0"))
      << read("node0.log");
}

}  // namespace
}  // namespace tandem::parallel
