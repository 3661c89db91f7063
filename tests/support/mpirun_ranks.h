#pragma once
/// Multi-process tests of the MPI backend: Open MPI's mpirun starts N copies of the current test
/// binary as the ranks (spawn_ranks.h does the same through tandem-run's launcher for Gloo).
///
///   TEST(MpiCollectivesMultiprocess, AllreduceSums) {
///     TANDEM_RUN_UNDER_MPIRUN(3);   // parent: mpirun -np 3 of this test, expects all to pass
///     auto group = init_process_group("mpi", mpi_environment());
///     ...                           // the body runs in every rank
///   }
///
/// The ranks run as root if need be (--allow-run-as-root) and may outnumber the cores
/// (--oversubscribe), with one kernel thread each. A build without MPI, or a machine without
/// mpirun on PATH, skips such tests with a message; CI has both (scripts/install_deps.sh).

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "tests/support/spawn_ranks.h"

namespace tandem::testing {

/// Sets, in this process's environment (which mpirun passes on to its ranks), what the tests'
/// MPI jobs need: mpirun's consent to run as root (OMPI_ALLOW_RUN_AS_ROOT=1 and _CONFIRM=1),
/// and in an AddressSanitizer build fast_unwind_on_malloc=0, so that LeakSanitizer sees the Open
/// MPI functions its suppressions name (scripts/lsan.supp). mpirun_ranks() does this in the
/// child that runs mpirun; a test that runs a program which starts mpirun itself calls it.
void export_mpirun_environment();

/// Why MPI jobs cannot run here ("this build has no MPI backend", "mpirun is not on PATH"), or
/// "" when they can.
std::string mpirun_unavailable_reason();

struct MpirunOptions {
  /// The whole job's limit; mpirun and its ranks are killed after it.
  std::chrono::seconds timeout{90};
  /// Extra environment variables for every rank.
  std::map<std::string, std::string> env{};
  /// The command instead of this test binary (its arguments follow it); empty: this binary
  /// with --gtest_filter.
  std::vector<std::string> command{};
};

/// Runs `mpirun -np world_size` of this binary with --gtest_filter=gtest_filter (or of
/// options.command) and TANDEM_SPAWNED_RANK=1, and returns how it ended: exit_codes holds
/// mpirun's exit status for every rank (mpirun fails when any rank does), output every rank's
/// lines prefixed "[rank R] " as spawn_ranks() writes them, and mpirun's own lines unprefixed.
SpawnResult mpirun_ranks(int world_size, const std::string& gtest_filter,
                         const MpirunOptions& options = {});

}  // namespace tandem::testing

/// In the parent, runs the enclosing test under mpirun as `world_size` ranks, expects them to
/// pass and returns (skips where mpirun_unavailable_reason() says why); in a rank, does
/// nothing so the rest of the test body runs. Extra arguments: an MpirunOptions.
#define TANDEM_RUN_UNDER_MPIRUN(world_size, ...)                                                \
  if (!::tandem::testing::launched_as_rank()) {                                                 \
    if (const std::string why = ::tandem::testing::mpirun_unavailable_reason(); !why.empty()) { \
      GTEST_SKIP() << why;                                                                      \
    }                                                                                           \
    EXPECT_TRUE(::tandem::testing::ranks_passed(::tandem::testing::mpirun_ranks(                \
        (world_size), ::tandem::testing::current_test_filter() __VA_OPT__(, ) __VA_ARGS__)));   \
    return;                                                                                     \
  }
