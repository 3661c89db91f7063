// train_cifar --backend mpi as a user runs it: under mpirun it trains the job that two Gloo
// ranks train, and without mpirun it says in one line how to start it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "parallel/comm/mpi/mpi_process_group.h"
#include "tests/apps/train_cifar_runs.h"
#include "tests/support/mpirun_ranks.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_paths.h"

namespace tandem::apps {
namespace {

using testing::TempDir;

// Two ranks sum each gradient element in one addition, whichever algorithm MPI or Gloo picks,
// and every other exchange is a copy or the same two-term sum: the epochs agree exactly.
TEST(TrainCifarMpiMultiprocess, TrainsAsTheSameJobOverGlooDoes) {
  if (const std::string why = testing::mpirun_unavailable_reason(); !why.empty()) {
    GTEST_SKIP() << why;
  }
  TempDir dir;
  const std::vector<std::string> ddp = {"--mode", "ddp", "--threads", "1", "--epochs", "2"};
  std::vector<std::string> gloo = quick_run(dir.file("gloo.jsonl"), ddp);
  gloo.insert(gloo.end(), {"--backend", "gloo", "--nproc", "2"});
  const testing::ProgramRun gloo_run = train_cifar(gloo);
  ASSERT_EQ(gloo_run.exit_code, 0) << gloo_run.output;

  std::vector<std::string> mpi = quick_run(dir.file("mpi.jsonl"), ddp);
  mpi.insert(mpi.begin(), testing::kTrainCifarProgram);
  mpi.insert(mpi.end(), {"--backend", "mpi"});
  const testing::SpawnResult mpi_run =
      testing::mpirun_ranks(2, "", {.timeout = std::chrono::seconds(120), .command = mpi});
  ASSERT_EQ(mpi_run.exit_codes.at(0), 0) << mpi_run.output;
  EXPECT_NE(mpi_run.output_of(0).find("2 ranks, mpi on cpu"), std::string::npos) << mpi_run.output;
  expect_same_epochs(epochs_of(read_log(dir.file("mpi.jsonl"))),
                     epochs_of(read_log(dir.file("gloo.jsonl"))));
}

// mpirun starts MPI's ranks, so --nproc cannot; a build without MPI says how to get it first.
TEST(TrainCifarMpi, NprocWithoutMpirunIsRefusedInOneLine) {
  const testing::ProgramRun run =
      train_cifar({"--mode", "ddp", "--backend", "mpi", "--nproc", "2", "--synthetic"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  const std::string expected =
      parallel::mpi_available()
          ? "train_cifar: error: --backend mpi: mpirun starts the ranks, not --nproc: mpirun -np "
            "2 train_cifar --mode ddp --backend mpi ...\n"
          : "train_cifar: error: [mpi] this build has no MPI backend: install Open MPI";
  EXPECT_EQ(run.output.rfind(expected, 0), 0u) << run.output;
}

}  // namespace
}  // namespace tandem::apps
