// The MPI group beyond the bodies every backend shares (collectives_test.cpp): a receive of the
// wrong size, a receive its group outlives, and ranks that mpirun did not start.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "engine/tandem.h"
#include "parallel/comm/init_process_group.h"
#include "parallel/comm/mpi/mpi_process_group.h"
#if TANDEM_WITH_MPI
#include "parallel/comm/mpi/mpi_engine.h"
#endif
#include "tests/support/error_message.h"
#include "tests/support/mpirun_ranks.h"
#include "tests/support/spawn_ranks.h"

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;
using testing::contains;
using testing::error_message;

std::shared_ptr<ProcessGroup> mpi() {
  return init_process_group("mpi", mpi_environment(), {.timeout = 30s});
}

// MPI matches a message by sender, tag and communicator alone: a longer one fails the receive
// (MPI_ERR_TRUNCATE), a shorter one is caught by its count; either is dropped and the group
// goes on. (A dtype of the same size in bytes is not caught: MPI does not carry it.) A receive
// still pending when its group is destroyed is cancelled and fails at once.
TEST(MpiPointToPointMultiprocess, AWrongSizeFailsTheReceiveOnly) {
  TANDEM_RUN_UNDER_MPIRUN(2);
  auto group = mpi();
  if (group->rank() == 0) {
    group->send(full({5}, 1.0), 1, 4);
    group->send(full({3}, 1.0), 1, 4);
    group->send(full({4}, 2.0), 1, 4);
  } else {
    for (const char* expected :
         {"MPI_ERR_TRUNCATE", "received 3 elements from rank 0 but the tensor has 4"}) {
      Tensor t = zeros({4});
      const std::string message = error_message([&] { group->recv(t, 0, 4); });
      EXPECT_TRUE(contains(message, "[mpi] irecv #")) << message;
      EXPECT_TRUE(contains(message, " on rank 1 of 2 from rank 0, tag 4 failed: ")) << message;
      EXPECT_TRUE(contains(message, expected)) << message;
    }
    Tensor t = zeros({4});
    group->recv(t, 0, 4);
    EXPECT_EQ(t.to_vector<float>(), std::vector<float>(4, 2.0f));
  }
  group->barrier()->wait();
  if (group->rank() == 0) {
    auto never = group->irecv(zeros({1}), 1, 99);  // rank 1 sends nothing with tag 99
    const auto start = std::chrono::steady_clock::now();
    group.reset();
    const std::string message = error_message([&] { never->wait(10s); });
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
    EXPECT_TRUE(contains(message, "did not complete: the group was destroyed first")) << message;
  }
}

// Ranks started by tandem-run (or torchrun) are MPI jobs of one each: one line says to use
// mpirun, rather than each training alone. (They start MPI, so they get the MPI ranks'
// environment too.)
TEST(MpiLaunchMultiprocess, RanksOfAnotherLauncherAreToldToUseMpirun) {
  if (const std::string why = testing::mpirun_unavailable_reason(); !why.empty()) {
    GTEST_SKIP() << why;
  }
  if (!testing::launched_as_rank()) testing::export_mpirun_environment();
  TANDEM_RUN_AS_RANKS(2);
  const std::string message = error_message([] { mpi(); });
  EXPECT_TRUE(contains(message,
                       "[mpi] a launcher started this process as one of WORLD_SIZE=2 (tandem-run "
                       "or torchrun), but MPI sees a job of 1: the mpi backend runs under mpirun, "
                       "which starts the ranks itself (mpirun -np 2 <program> ...)"))
      << message;
}

#if TANDEM_WITH_MPI
// Note [MPI polling]: the engine sleeps between tests only while a peer may still be on its way.
TEST(MpiPolling, SleepsBetweenTestsOnlyWhileAPeerMayBeLate) {
  using std::chrono::microseconds;
  EXPECT_TRUE(spin_between_tests(microseconds(100), false)) << "operations are completing";
  EXPECT_FALSE(spin_between_tests(microseconds(5000), false)) << "quiet for 5 ms, none joined";
  EXPECT_TRUE(spin_between_tests(microseconds(5000000), true)) << "every rank is in: transfer";
}
#endif

}  // namespace
}  // namespace tandem::parallel
