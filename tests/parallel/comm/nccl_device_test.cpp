// The NCCL group's pure decisions, on any machine: which GPU a rank takes (Note [NCCL device]) and
// whether the libnccl found at run time suits the headers Tandem was built with.
#include <gtest/gtest.h>

#include "parallel/comm/nccl_process_group.h"
#include "tests/support/error_message.h"

namespace tandem::parallel {
namespace {

using testing::contains;
using testing::error_message;

TEST(NcclDevice, EachLocalRankTakesItsOwnGpu) {
  for (int local_rank = 0; local_rank < 4; ++local_rank) {
    const NcclDeviceChoice choice = choose_nccl_device(local_rank + 4, local_rank, 4, 4);
    EXPECT_EQ(choice.device, local_rank);
    EXPECT_EQ(choice.note, "");
  }
  EXPECT_EQ(choose_nccl_device(1, 1, 2, 8).device, 1) << "more GPUs than processes is fine";
  EXPECT_EQ(choose_nccl_device(0, 0, 1, 1).note, "") << "one process, one GPU: the usual case";
}

// srun --gpus-per-task=1: each rank sees only its own GPU, as cuda:0.
TEST(NcclDevice, OneVisibleGpuPerRankIsDeviceZeroAndSaysSo) {
  for (int local_rank = 0; local_rank < 4; ++local_rank) {
    const NcclDeviceChoice choice = choose_nccl_device(local_rank, local_rank, 4, 1);
    EXPECT_EQ(choice.device, 0);
    EXPECT_TRUE(contains(choice.note, "[nccl] rank " + std::to_string(local_rank) +
                                          " (local rank " + std::to_string(local_rank) +
                                          " of 4 on this machine) sees one CUDA device: using "
                                          "it as cuda:0"))
        << choice.note;
  }
}

TEST(NcclDevice, TooFewGpusFailOnEveryRank) {
  const std::string beyond = error_message([] { choose_nccl_device(3, 3, 4, 2); });
  EXPECT_TRUE(contains(beyond,
                       "[nccl] rank 3 needs cuda:3 (its local rank), but this machine has 2 CUDA "
                       "device(s); start at most as many processes per machine (--nproc-per-node)"))
      << beyond;
  // Rank 0 could take cuda:0, but half of its peers cannot: it fails too, at once, rather than
  // waiting for them in the rendezvous.
  const std::string within = error_message([] { choose_nccl_device(0, 0, 4, 2); });
  EXPECT_TRUE(contains(within,
                       "[nccl] rank 0: 4 processes on this machine need a GPU each, but it has 2 "
                       "CUDA device(s)"))
      << within;
  EXPECT_TRUE(contains(within, "srun --gpus-per-task=1")) << within;
  EXPECT_TRUE(contains(error_message([] { choose_nccl_device(1, 1, 1, 1); }),
                       "[nccl] rank 1 needs cuda:1 (its local rank), but this machine has 1"));
  EXPECT_TRUE(contains(error_message([] { choose_nccl_device(0, 0, 1, 0); }),
                       "[nccl] rank 0 sees no CUDA device"));
}

TEST(NcclVersion, TheHeadersVersionOrANewerMinorPasses) {
  EXPECT_NO_THROW(check_nccl_version(22805, 22805));
  EXPECT_NO_THROW(check_nccl_version(22801, 22805)) << "patch releases do not matter";
  EXPECT_NO_THROW(check_nccl_version(23001, 22805));
}

TEST(NcclVersion, AnOlderOrOtherMajorLibraryFailsInOneLine) {
  const std::string older = error_message([] { check_nccl_version(22105, 22805); });
  EXPECT_TRUE(contains(older,
                       "[nccl] libnccl is 2.21.5, but Tandem was built with the NCCL 2.28 "
                       "headers: put that NCCL or a newer 2.x first on the library path "
                       "(LD_LIBRARY_PATH), or rebuild Tandem against this one"))
      << older;
  EXPECT_TRUE(contains(error_message([] { check_nccl_version(30001, 22805); }),
                       "[nccl] libnccl is 3.0.1, but Tandem was built with the NCCL 2.28"));
}

}  // namespace
}  // namespace tandem::parallel
