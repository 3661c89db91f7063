// How an MPI job ends when a rank does not play along (Notes [MPI timeouts] and [MPI lifetime]
// in mpi_engine.h): a hung rank, a dead rank and a rank that fails all end the whole job, with a
// line saying why, well within the timeout. Each parent test runs one mpirun job of rank-only
// bodies (MpiFaultRanks.*, which skip outside mpirun) and reads how it ended.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include "engine/tandem.h"
#include "parallel/comm/init_process_group.h"
#include "parallel/comm/mpi/mpi_process_group.h"
#include "tests/support/error_message.h"
#include "tests/support/mpirun_ranks.h"

#if TANDEM_WITH_MPI
#include <mpi.h>
#endif

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::contains;

std::shared_ptr<ProcessGroup> mpi_group(std::chrono::milliseconds timeout) {
  return init_process_group("mpi", mpi_environment(), {.timeout = timeout});
}

// --- the ranks' side

// Rank 1 never joins the all-reduce: rank 0's engine gives up after the group's 2 s.
TEST(MpiFaultRanks, RankOneSkipsTheAllreduce) {
  TANDEM_SKIP_UNLESS_RANK();
  auto group = mpi_group(2s);
  if (group->rank() == 1) {
    std::this_thread::sleep_for(60s);
    return;
  }
  Tensor t = ones({4});
  group->allreduce({t})->wait(120s);  // longer than the group's timeout: the engine acts first
}

TEST(MpiFaultRanks, RankOneDiesInTheAllreduce) {
  TANDEM_SKIP_UNLESS_RANK();
  auto group = mpi_group(120s);
  if (group->rank() == 1) std::raise(SIGKILL);
  Tensor t = ones({4});
  group->allreduce({t})->wait();
}

// Rank 1 fails (its test fails, so it exits 1) while rank 0 waits for it in an all-reduce with a
// long timeout: rank 1 must not finalise MPI, which would wait for rank 0.
TEST(MpiFaultRanks, RankOneFailsWhileRankZeroWaits) {
  TANDEM_SKIP_UNLESS_RANK();
  auto group = mpi_group(120s);
  if (group->rank() == 1) {
    group.reset();
    FAIL() << "rank 1 gives up";
  }
  Tensor t = ones({4});
  group->allreduce({t})->wait();
}

// --- the parents

struct Ended {
  testing::SpawnResult result;
  double seconds = 0;
};

Ended run_job(const std::string& body) {
  const auto start = Clock::now();
  testing::SpawnResult result =
      testing::mpirun_ranks(2, "MpiFaultRanks." + body, {.timeout = std::chrono::seconds(60)});
  return {std::move(result), std::chrono::duration<double>(Clock::now() - start).count()};
}

#define SKIP_WITHOUT_MPIRUN()                                                       \
  if (const std::string why = testing::mpirun_unavailable_reason(); !why.empty()) { \
    GTEST_SKIP() << why;                                                            \
  }

TEST(MpiFaultsMultiprocess, AHungRankEndsTheJobWithOneLineAfterTheTimeout) {
  SKIP_WITHOUT_MPIRUN();
  const Ended ended = run_job("RankOneSkipsTheAllreduce");
  EXPECT_FALSE(ended.result.timed_out);
  EXPECT_NE(ended.result.exit_codes.at(0), 0);
  EXPECT_TRUE(contains(ended.result.output,
                       "[rank 0] [mpi] allreduce #1 on rank 0 of 2 did not complete within 2 s (a "
                       "peer may have died or hung, or the ranks issued different collectives); "
                       "MPI cannot cancel it, so this rank ends the job with MPI_Abort"))
      << ended.result.output;
  EXPECT_LT(ended.seconds, 30) << "rank 1 sleeps 60 s: the abort must not wait for it";
}

TEST(MpiFaultsMultiprocess, ADeadRankEndsTheJobAtOnce) {
  SKIP_WITHOUT_MPIRUN();
  const Ended ended = run_job("RankOneDiesInTheAllreduce");
  EXPECT_FALSE(ended.result.timed_out);
  EXPECT_NE(ended.result.exit_codes.at(0), 0);
  EXPECT_TRUE(contains(ended.result.output, "exited on signal 9")) << ended.result.output;
  EXPECT_LT(ended.seconds, 30) << "the timeout is 120 s: mpirun itself must end the job";
}

TEST(MpiFaultsMultiprocess, AFailingRankEndsTheJobAtOnce) {
  SKIP_WITHOUT_MPIRUN();
  const Ended ended = run_job("RankOneFailsWhileRankZeroWaits");
  EXPECT_FALSE(ended.result.timed_out);
  EXPECT_NE(ended.result.exit_codes.at(0), 0);
  EXPECT_TRUE(contains(ended.result.output, "[rank 1] [  FAILED  ]")) << ended.result.output;
  EXPECT_TRUE(contains(ended.result.output, "exited with non-zero status")) << ended.result.output;
  EXPECT_LT(ended.seconds, 30) << "the timeout is 120 s: rank 1 must not wait in MPI_Finalize";
}

#if TANDEM_WITH_MPI
// A program that initialised MPI itself below MPI_THREAD_MULTIPLE: the group refuses in one line
// (MPI then stays the program's to finalise).
TEST(MpiFaultRanks, ProgramInitialisedMpiSerialized) {
  TANDEM_SKIP_UNLESS_RANK();
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  ASSERT_EQ(provided, MPI_THREAD_SERIALIZED);
  for (int attempt = 0; attempt < 2; ++attempt) {  // the second call repeats the first's error
    const std::string message = testing::error_message([] { mpi_group(10s); });
    EXPECT_TRUE(contains(message,
                         "[mpi] MPI provides only MPI_THREAD_SERIALIZED (the program initialised "
                         "it), but Tandem's MPI groups need MPI_THREAD_MULTIPLE"))
        << message;
  }
  MPI_Finalize();
}

TEST(MpiFaultsMultiprocess, ALowerThreadLevelIsRefusedInOneLine) {
  SKIP_WITHOUT_MPIRUN();
  EXPECT_TRUE(testing::ranks_passed(
      testing::mpirun_ranks(1, "MpiFaultRanks.ProgramInitialisedMpiSerialized")));
}
#endif

}  // namespace
}  // namespace tandem::parallel
