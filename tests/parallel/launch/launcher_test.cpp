#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "parallel/comm/rendezvous/launch_env.h"
#include "parallel/comm/rendezvous/store_server.h"
#include "parallel/launch/launcher.h"
#include "tests/parallel/launch/launcher_fixture.h"
#include "tests/support/error_message.h"
#include "tests/support/spawn_ranks.h"

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;
using tandem::testing::contains;
using tandem::testing::error_message;

TEST_F(LauncherTest, PrefixesEveryLineWithTheRank) {
  const auto result = run(shell(2, "echo out $RANK; echo err $RANK >&2; printf 'a\\nb\\rc'"));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_TRUE(result.message.empty());
  const std::string text = output();
  for (const std::string r : {"0", "1"}) {
    const std::string p = "[rank " + r + "] ";
    EXPECT_TRUE(contains(text, p + "out " + r + "\n")) << text;
    EXPECT_TRUE(contains(text, p + "err " + r + "\n")) << text;
    // '\r' ends a line too (progress bars); an unterminated last line gets its newline.
    EXPECT_TRUE(contains(text, p + "a\n")) << text;
    EXPECT_TRUE(contains(text, p + "b\r")) << text;
    EXPECT_TRUE(contains(text, p + "c\n")) << text;
  }
}

TEST_F(LauncherTest, PassesTheRendezvousVariables) {
  LaunchOptions options =
      shell(3,
            "echo \"$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_ADDR $GROUP_RANK "
            "$TANDEM_STORE_HOSTED $TANDEM_NUM_THREADS $EXTRA port=$MASTER_PORT\"");
  options.env = {{"EXTRA", "extra"}, {"TANDEM_NUM_THREADS", "7"}};
  const auto result = run(options);
  ASSERT_EQ(result.exit_code, 0) << output();
  const std::string text = output();
  for (int r = 0; r < 3; ++r) {
    const std::string expected = "[rank " + std::to_string(r) + "] " + std::to_string(r) + " " +
                                 std::to_string(r) + " 3 3 127.0.0.1 0 1 7 extra port=";
    EXPECT_TRUE(contains(text, expected)) << text;
  }
  // Port 0 became a real port, the same for every rank.
  EXPECT_FALSE(contains(text, "port=0\n")) << text;
  ASSERT_EQ(result.workers.size(), 3u);
  for (const auto& w : result.workers) EXPECT_EQ(w.exit_code, 0);
}

// Note [Store handshake]: a one-node launcher makes the job's token and hands it to its workers;
// one it was given (TANDEM_JOB_TOKEN across machines) is passed on unchanged.
TEST_F(LauncherTest, OneNodeMakesTheJobTokenAndHandsItToItsWorkers) {
  ::unsetenv("TANDEM_JOB_TOKEN");
  ASSERT_EQ(run(shell(2, "echo token=${#TANDEM_JOB_TOKEN}")).exit_code, 0) << output();
  EXPECT_TRUE(contains(output(), "[rank 0] token=64\n")) << output();
  EXPECT_TRUE(contains(output(), "[rank 1] token=64\n")) << output();
  LaunchOptions given = shell(1, "echo token=$TANDEM_JOB_TOKEN");
  given.job_token = "given-token-0123456789";
  ASSERT_EQ(run(given).exit_code, 0) << output();
  EXPECT_TRUE(contains(output(), "token=given-token-0123456789")) << output();
}

// Note [Store address]: a one-node job's store listens on loopback only (review S1: it was every
// interface). The worker reads the listening sockets from /proc/net/tcp{,6}.
TEST_F(LauncherTest, AOneNodeJobsStoreListensOnLoopbackOnly) {
  ASSERT_EQ(run(shell(1, "printf 'port=%04X\\n' $MASTER_PORT; cat /proc/net/tcp /proc/net/tcp6"))
                .exit_code,
            0)
      << output();
  const std::string text = output();
  const size_t at = text.find("port=");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string port = text.substr(at + 5, 4);
  EXPECT_TRUE(contains(text, "0100007F:" + port + " 00000000:0000 0A")) << text;
  EXPECT_FALSE(contains(text, "00000000:" + port + " 00000000:0000 0A")) << text;
  EXPECT_FALSE(contains(text, std::string(32, '0') + ":" + port)) << text;
}

TEST_F(LauncherTest, SplitsTheCoresBetweenWorkers) {
  ::unsetenv("TANDEM_NUM_THREADS");
  const auto result = run(shell(2, "echo threads=$TANDEM_NUM_THREADS"));
  ASSERT_EQ(result.exit_code, 0);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_TRUE(contains(output(), "threads=" + std::to_string(std::max(1, cores / 2)) + "\n"))
      << output();
}

TEST_F(LauncherTest, ARankStoppedByAnInterruptIsNotBlamedForAFailure) {
  // train_cifar's ranks stop together after SIGINT/SIGTERM reaches any of them and exit 130/143;
  // the first to exit is not necessarily the one signalled (review D9).
  const auto result = run(shell(2, "if [ $RANK = 1 ]; then exit 130; fi; exec sleep 60"));
  EXPECT_EQ(result.exit_code, 130);
  EXPECT_TRUE(contains(result.message, "stopped after an interrupt (exit status 130)"))
      << result.message;
  EXPECT_FALSE(contains(result.message, "exited with status")) << result.message;
}

TEST_F(LauncherTest, OneFailureStopsTheOthersAndNamesTheRank) {
  // Rank 0 would sleep for a minute; rank 1 fails at once.
  const auto result = run(shell(2, "if [ $RANK = 1 ]; then exit 3; fi; exec sleep 60"));
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_TRUE(contains(result.message, "[tandem-run] rank 1 (local rank 1, pid "))
      << result.message;
  EXPECT_TRUE(contains(result.message, "exited with status 3; stopping the other workers"))
      << result.message;
  EXPECT_TRUE(contains(output(), result.message)) << output();
  ASSERT_EQ(result.workers.size(), 2u);
  EXPECT_EQ(result.workers[0].signal, SIGTERM);  // stopped, not finished
  EXPECT_EQ(result.workers[1].exit_code, 3);
}

TEST_F(LauncherTest, AWorkerKilledByASignalIsNamed) {
  const auto result = run(shell(2, "if [ $RANK = 0 ]; then kill -9 $$; fi; exec sleep 60"));
  EXPECT_EQ(result.exit_code, 128 + SIGKILL);
  EXPECT_TRUE(contains(result.message, "[tandem-run] rank 0 (local rank 0")) << result.message;
  EXPECT_TRUE(contains(result.message, "was killed by signal 9")) << result.message;
}

TEST_F(LauncherTest, WorkersIgnoringSigtermGetSigkillAfterTheGrace) {
  // Rank 1 fails only once rank 0 has had time to ignore SIGTERM (under load it sometimes had
  // not: SIGTERM then ended it, and the test failed).
  const auto result =
      run(shell(2, "if [ $RANK = 1 ]; then sleep 0.5; exit 1; fi; trap '' TERM; sleep 60"));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.workers[0].signal, SIGKILL);
}

TEST_F(LauncherTest, WithoutStopOnFailureTheOthersFinish) {
  LaunchOptions options = shell(2, "if [ $RANK = 1 ]; then exit 5; fi; sleep 0.3; echo finished");
  options.stop_on_failure = false;
  const auto result = run(options);
  EXPECT_EQ(result.exit_code, 5);
  EXPECT_EQ(result.workers[0].exit_code, 0);
  EXPECT_TRUE(contains(output(), "[rank 0] finished")) << output();
}

TEST_F(LauncherTest, TimeoutStopsTheJob) {
  LaunchOptions options = shell(2, "exec sleep 60");
  options.timeout = 300ms;
  const auto result = run(options);
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.exit_code, 124);
  EXPECT_TRUE(contains(result.message, "ran longer than its timeout of 300 ms")) << result.message;
}

TEST_F(LauncherTest, ForwardsSigintToTheWorkers) {
  const std::string ready = dir_.file("ready");
  LaunchOptions options =
      shell(2, "trap 'echo got INT; exit 7' INT; touch " + ready + "$RANK; sleep 60 & wait");
  std::thread interrupter = interrupt_when_ready(ready);
  const auto result = run(options);
  interrupter.join();
  EXPECT_EQ(result.exit_code, 128 + SIGINT);
  EXPECT_TRUE(contains(result.message, "[tandem-run] interrupted by")) << result.message;
  EXPECT_TRUE(contains(output(), "[rank 0] got INT")) << output();
  EXPECT_TRUE(contains(output(), "[rank 1] got INT")) << output();
  EXPECT_EQ(result.workers[0].exit_code, 7);
}

TEST_F(LauncherTest, BadOptionsAreClearErrors) {
  LaunchOptions options = shell(2, "true");
  options.nproc_per_node = 0;
  EXPECT_TRUE(contains(error_message([&] { launch(options); }),
                       "[tandem-run] --nproc-per-node must be at least 1"));
  options = shell(2, "true");
  options.nnodes = 2;
  options.node_rank = 2;
  EXPECT_TRUE(contains(error_message([&] { launch(options); }),
                       "[tandem-run] --node-rank 2 is out of range for --nnodes 2"));
  options.node_rank = 1;
  options.master_port = 0;
  EXPECT_TRUE(contains(error_message([&] { launch(options); }),
                       "[tandem-run] --master-port 0 (a free port) only works with one node"));
  options = shell(1, "true");
  options.command.clear();
  EXPECT_TRUE(contains(error_message([&] { launch(options); }), "[tandem-run] no command to run"));
  options.command = {"surely-not-a-command-tandem"};
  EXPECT_TRUE(contains(error_message([&] { launch(options); }),
                       "[tandem-run] command not found: surely-not-a-command-tandem"));
}

TEST_F(LauncherTest, BusyPortIsAClearError) {
  StoreServer other;
  for (bool host_store : {true, false}) {
    LaunchOptions options = shell(1, "true");
    options.master_port = other.port();
    options.host_store = host_store;
    const std::string message = error_message([&] { launch(options); });
    EXPECT_TRUE(
        contains(message, "[tandem-run] cannot use --master-port " + std::to_string(other.port())))
        << message;
    EXPECT_TRUE(contains(message, "is already in use")) << message;
  }
}

// --- spawn_ranks, the helper the multi-process tests rely on

TEST(SpawnRanksHelper, ExitWithRank) {
  TANDEM_SKIP_UNLESS_RANK();
  std::_Exit(from_environment().rank);  // a test that "fails" with its rank as the status
}

TEST(SpawnRanksHelper, PrintEnvironment) {
  TANDEM_SKIP_UNLESS_RANK();
  const DistributedEnv env = from_environment();
  std::printf("env %d %d %d %d %s\n", env.rank, env.world_size, env.local_rank,
              env.local_world_size, std::getenv("SPAWN_EXTRA"));
}

TEST(SpawnRanksMultiprocess, ReportsEachRanksExitAndOutput) {
  auto result = tandem::testing::spawn_ranks(
      3, "SpawnRanksHelper.ExitWithRank", tandem::testing::SpawnOptions{.stop_on_failure = false});
  EXPECT_EQ(result.exit_codes, (std::vector<int>{0, 1, 2}));
  EXPECT_FALSE(result.all_succeeded());
  EXPECT_FALSE(tandem::testing::ranks_passed(result));

  result = tandem::testing::spawn_ranks(2, "SpawnRanksHelper.PrintEnvironment", 30s,
                                        {{"SPAWN_EXTRA", "extra"}});
  EXPECT_TRUE(tandem::testing::ranks_passed(result));
  EXPECT_TRUE(contains(result.output_of(0), "env 0 2 0 2 extra\n")) << result.output;
  EXPECT_TRUE(contains(result.output_of(1), "env 1 2 1 2 extra\n")) << result.output;
}

TEST(SpawnRanksMultiprocess, AFilterMatchingNothingDoesNotPass) {
  const auto result = tandem::testing::spawn_ranks(2, "NoSuchSuite.NoSuchTest");
  EXPECT_TRUE(result.all_succeeded());  // GoogleTest exits 0 when nothing matched ...
  EXPECT_FALSE(tandem::testing::ranks_passed(result));  // ... which must not count as a pass
}

}  // namespace
}  // namespace tandem::parallel
