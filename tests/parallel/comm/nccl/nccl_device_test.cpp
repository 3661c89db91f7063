// The NCCL group's pure decisions, on any machine: which GPU a rank takes (Note [NCCL device]) and
// whether the libnccl found at run time suits the headers Tandem was built with.
#include <gtest/gtest.h>

#include <map>

#include "parallel/comm/nccl/nccl_process_group.h"
#include "tests/support/error_message.h"

namespace tandem::parallel {
namespace {

using testing::contains;
using testing::error_message;

const LauncherGpus kUnset{};  // torchrun, tandem-run, mpirun: CUDA_VISIBLE_DEVICES unset

TEST(NcclDevice, EachLocalRankTakesItsOwnGpu) {
  for (int local_rank = 0; local_rank < 4; ++local_rank) {
    const NcclDeviceChoice choice = choose_nccl_device(local_rank + 4, local_rank, 4, 4, kUnset);
    EXPECT_EQ(choice.device, local_rank);
    EXPECT_EQ(choice.note, "");
  }
  EXPECT_EQ(choose_nccl_device(1, 1, 2, 8, kUnset).device, 1) << "more GPUs than processes is fine";
  EXPECT_EQ(choose_nccl_device(0, 0, 1, 1, kUnset).note, "") << "one process, one GPU: the usual";
  // CUDA_VISIBLE_DEVICES=2,3 for both ranks: they see two GPUs, as cuda:0 and cuda:1.
  EXPECT_EQ(choose_nccl_device(1, 1, 2, 2, {.visible_devices = "2,3"}).device, 1);
  EXPECT_EQ(nccl_gpus_needed(4, 4, kUnset), 4);
}

// srun --gpus-per-task=1, or a wrapper setting CUDA_VISIBLE_DEVICES=$LOCAL_RANK: each rank sees
// only its own GPU, as cuda:0.
TEST(NcclDevice, OneDeviceInCudaVisibleDevicesIsTheRanksOwnGpu) {
  for (int local_rank = 0; local_rank < 4; ++local_rank) {
    const LauncherGpus gpus{.visible_devices = std::to_string(local_rank)};
    const NcclDeviceChoice choice = choose_nccl_device(local_rank, local_rank, 4, 1, gpus);
    EXPECT_EQ(choice.device, 0);
    EXPECT_EQ(choice.note, "[nccl] rank " + std::to_string(local_rank) + " (local rank " +
                               std::to_string(local_rank) +
                               " of 4 on this machine) sees one CUDA device: using it as cuda:0, "
                               "the GPU the launcher gave this rank (CUDA_VISIBLE_DEVICES=" +
                               std::to_string(local_rank) + ")");
  }
  EXPECT_EQ(nccl_gpus_needed(4, 1, {.visible_devices = "GPU-5e8a"}), 1) << "a UUID names one";
  EXPECT_EQ(nccl_gpus_needed(4, 1, {.visible_devices = "3,"}), 1) << "empty entries do not count";
}

// Slurm's per-task binding through cgroups: the step has a GPU per task on this machine, and
// each task sees one.
TEST(NcclDevice, SlurmGpusForEveryLocalRankMakeTheOneVisibleGpuTheRanksOwn) {
  for (const char* variable : {"0,1,2,3", "4,5,6,7,0,1,2,3"}) {
    const NcclDeviceChoice choice = choose_nccl_device(2, 2, 4, 1, {.slurm_gpus = variable});
    EXPECT_EQ(choice.device, 0) << variable;
    EXPECT_NE(choice.note.find("using it as cuda:0"), std::string::npos) << choice.note;
  }
  // One GPU for the two tasks of the step: they would share it.
  EXPECT_EQ(nccl_gpus_needed(2, 1, {.slurm_gpus = "0"}), 2);
  // Each task sees the step's every GPU (--gpu-bind=none): cuda:local_rank, as without Slurm.
  EXPECT_EQ(choose_nccl_device(3, 3, 4, 4, {.slurm_gpus = "0,1,2,3"}).device, 3);
}

// A one-GPU machine: two ranks there would both take cuda:0 and fail inside NCCL ("Duplicate GPU
// detected"); every rank says so at once instead, those below the count too.
TEST(NcclDevice, FewerVisibleGpusThanLocalRanksFailOnEveryRank) {
  for (int local_rank = 0; local_rank < 2; ++local_rank) {
    const std::string message =
        error_message([&] { choose_nccl_device(local_rank, local_rank, 2, 1, kUnset); });
    EXPECT_EQ(message.find("[nccl] rank " + std::to_string(local_rank) +
                           ": 2 processes on this machine need 2 GPUs, 1 is visible "
                           "(CUDA_VISIBLE_DEVICES unset); start at most 1 per machine "
                           "(--nproc-per-node), give each process one GPU of its own "
                           "(CUDA_VISIBLE_DEVICES, srun --gpus-per-task=1), or use the gloo "
                           "backend on CPUs"),
              0u)
        << message;
  }
  // Every rank given the same two GPUs: one device per rank is not listed.
  EXPECT_TRUE(
      contains(error_message([] { choose_nccl_device(3, 3, 4, 2, {.visible_devices = "0,1"}); }),
               "4 processes on this machine need 4 GPUs, 2 are visible "
               "(CUDA_VISIBLE_DEVICES=0,1)"));
  EXPECT_TRUE(contains(error_message([] { choose_nccl_device(1, 1, 2, 1, {.slurm_gpus = "0"}); }),
                       "2 processes on this machine need 2 GPUs, 1 is visible"));
  EXPECT_TRUE(contains(error_message([] { choose_nccl_device(1, 1, 1, 1, kUnset); }),
                       "[nccl] rank 1 needs cuda:1 (its local rank), but this machine has 1"));
  EXPECT_TRUE(contains(error_message([] { choose_nccl_device(0, 0, 1, 0, kUnset); }),
                       "[nccl] rank 0 sees no CUDA device"));
}

TEST(LauncherGpus, ReadsCudaVisibleDevicesAndSlurmsStepGpusFirst) {
  const auto lookup = [](std::map<std::string, std::string> variables) {
    return launcher_gpus([variables](const std::string& name) -> std::optional<std::string> {
      const auto it = variables.find(name);
      if (it == variables.end()) return std::nullopt;
      return it->second;
    });
  };
  const LauncherGpus none = lookup({});
  EXPECT_FALSE(none.visible_devices.has_value());
  EXPECT_FALSE(none.slurm_gpus.has_value());
  const LauncherGpus slurm = lookup(
      {{"CUDA_VISIBLE_DEVICES", "1"}, {"SLURM_STEP_GPUS", "0,1"}, {"SLURM_JOB_GPUS", "0,1,2,3"}});
  EXPECT_EQ(slurm.visible_devices, "1");
  EXPECT_EQ(slurm.slurm_gpus, "0,1");
  EXPECT_EQ(lookup({{"SLURM_JOB_GPUS", "0,1,2,3"}}).slurm_gpus, "0,1,2,3");
  EXPECT_EQ(listed_devices(""), 0) << "CUDA_VISIBLE_DEVICES= hides every GPU";
  EXPECT_EQ(listed_devices("0,1,2"), 3);
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
