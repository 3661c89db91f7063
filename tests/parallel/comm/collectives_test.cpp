// Every collective and the group operations of each host backend, on 2, 3 and 4 ranks: Gloo's
// ranks started by tandem-run's launcher, MPI's by mpirun. The bodies are collective_cases.h's,
// one job per test.
#include <gtest/gtest.h>

#include "parallel/comm/init_process_group.h"
#include "parallel/comm/mpi/mpi_process_group.h"
#include "parallel/comm/process_group.h"
#include "tests/parallel/comm/collective_cases.h"
#include "tests/support/mpirun_ranks.h"
#include "tests/support/spawn_ranks.h"

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;
using namespace testing;  // collective_cases.h

std::shared_ptr<ProcessGroup> gloo() {
  return init_process_group("gloo", from_environment(), {.timeout = 30s});
}

std::shared_ptr<ProcessGroup> mpi() {
  return init_process_group("mpi", mpi_environment(), {.timeout = 30s});
}

TEST(GlooCollectivesMultiprocess, EveryCollectiveOnTwoRanks) {
  TANDEM_RUN_AS_RANKS(2);
  check_every_collective(*gloo());
}

TEST(GlooCollectivesMultiprocess, EveryCollectiveOnThreeRanks) {
  TANDEM_RUN_AS_RANKS(3);
  check_every_collective(*gloo());
}

TEST(GlooCollectivesMultiprocess, EveryCollectiveOnFourRanks) {
  TANDEM_RUN_AS_RANKS(4);
  check_every_collective(*gloo());
}

TEST(MpiCollectivesMultiprocess, EveryCollectiveOnTwoRanks) {
  TANDEM_RUN_UNDER_MPIRUN(2);
  check_every_collective(*mpi());
}

TEST(MpiCollectivesMultiprocess, EveryCollectiveOnThreeRanks) {
  TANDEM_RUN_UNDER_MPIRUN(3);
  check_every_collective(*mpi());
}

TEST(MpiCollectivesMultiprocess, EveryCollectiveOnFourRanks) {
  TANDEM_RUN_UNDER_MPIRUN(4);
  check_every_collective(*mpi());
}

TEST(GlooConsistencyMultiprocess, AMismatchFailsEveryRankWithOneLineAndTheGroupGoesOn) {
  TANDEM_RUN_AS_RANKS(3);
  check_consistency_refusals(*gloo());
}

TEST(MpiConsistencyMultiprocess, AMismatchFailsEveryRankWithOneLineAndTheGroupGoesOn) {
  TANDEM_RUN_UNDER_MPIRUN(3);
  check_consistency_refusals(*mpi());
}

TEST(GlooSubgroupMultiprocess, SubgroupsRunBesideTheWorldAndRefuseNonMembers) {
  TANDEM_RUN_AS_RANKS(4);
  check_subgroups(*gloo());
}

TEST(MpiSubgroupMultiprocess, SubgroupsRunBesideTheWorldAndRefuseNonMembers) {
  TANDEM_RUN_UNDER_MPIRUN(4);
  check_subgroups(*mpi());
}

TEST(GlooPointToPointMultiprocess, TagsAnySourceAndCollectivesInFlight) {
  TANDEM_RUN_AS_RANKS(3);
  check_tags_and_any_source(*gloo());
}

TEST(MpiPointToPointMultiprocess, TagsAnySourceAndCollectivesInFlight) {
  TANDEM_RUN_UNDER_MPIRUN(3);
  check_tags_and_any_source(*mpi());
}

}  // namespace
}  // namespace tandem::parallel
