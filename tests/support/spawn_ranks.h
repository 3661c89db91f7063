#pragma once
/// Multi-process tests: run N copies of the current test binary as the ranks of a job on
/// loopback, through the same launcher as tandem-run (parallel/launch/launcher.h).
///
/// The usual pattern is one test that is both the parent and the ranks:
///
///   TEST(GlooMultiprocess, AllreduceSums) {
///     TANDEM_RUN_AS_RANKS(2);   // parent: runs this test as 2 ranks, expects all to pass, returns
///     auto group = tandem::parallel::init_process_group("gloo", from_environment());
///     ...                       // the body runs in every rank
///   }
///
/// Name such suites "...Multiprocess" so CTest labels them `multiprocess`. For other shapes
/// (a rank that must die, ranks checked one by one) call spawn_ranks() and inspect the result;
/// a body that only makes sense as a rank starts with TANDEM_SKIP_UNLESS_RANK().

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::testing {

struct SpawnOptions {
  /// The whole job's limit; ranks still running then are stopped (SIGTERM, then SIGKILL).
  std::chrono::seconds timeout{60};
  /// Extra environment variables for every rank.
  std::map<std::string, std::string> env{};
  /// Whether one failing rank stops the others at once. Tests that kill a rank on purpose turn
  /// this off to see how the survivors react.
  bool stop_on_failure = true;
  /// true: the parent hosts the rendezvous store, as tandem-run does; false: rank 0 hosts it,
  /// as under mpirun or srun.
  bool launcher_hosts_store = true;
};

struct SpawnResult {
  std::vector<int> exit_codes;  ///< per rank: its exit status, or -1 when a signal ended it
  std::vector<int> signals;     ///< per rank: the signal that ended it, or 0
  bool timed_out = false;
  std::string output;   ///< every rank's stdout and stderr, each line prefixed "[rank R] "
  std::string message;  ///< the launcher's word on a failure, or empty

  bool all_succeeded() const;
  /// Rank r's lines, without their prefix.
  std::string output_of(int rank) const;
};

/// Runs world_size copies of this binary with --gtest_filter=gtest_filter and the rendezvous
/// variables (RANK, WORLD_SIZE, MASTER_ADDR, a free MASTER_PORT, ...) plus
/// TANDEM_SPAWNED_RANK=1, waits for them (killing stragglers after the timeout) and returns how
/// each ended. The ranks' output is also echoed to this process's stdout, so CTest shows it.
SpawnResult spawn_ranks(int world_size, const std::string& gtest_filter,
                        const SpawnOptions& options = {});
SpawnResult spawn_ranks(int world_size, const std::string& gtest_filter,
                        std::chrono::seconds timeout, std::map<std::string, std::string> env = {});

/// Passes when every rank exited 0 and each ran at least one test to success (a filter that
/// matches nothing must not pass silently); the failure message carries the ranks' output.
::testing::AssertionResult ranks_passed(const SpawnResult& result);

/// Whether this process is a rank started by spawn_ranks().
bool launched_as_rank();

/// "Suite.Name" of the running test, to spawn it again as ranks.
std::string current_test_filter();

}  // namespace tandem::testing

/// In the parent, runs the enclosing test as `world_size` ranks, expects them to pass and
/// returns; in a rank, does nothing so the rest of the test body runs. Extra arguments are
/// passed to spawn_ranks (a SpawnOptions, or a timeout and an env map).
#define TANDEM_RUN_AS_RANKS(world_size, ...)                                                  \
  if (!::tandem::testing::launched_as_rank()) {                                               \
    EXPECT_TRUE(::tandem::testing::ranks_passed(::tandem::testing::spawn_ranks(               \
        (world_size), ::tandem::testing::current_test_filter() __VA_OPT__(, ) __VA_ARGS__))); \
    return;                                                                                   \
  }

/// Skips a test body that only makes sense inside a rank started by spawn_ranks().
#define TANDEM_SKIP_UNLESS_RANK()                  \
  if (!::tandem::testing::launched_as_rank()) {    \
    GTEST_SKIP() << "runs only as a spawned rank"; \
  }
