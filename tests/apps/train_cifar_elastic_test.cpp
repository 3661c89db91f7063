// train_cifar resumed at another world size (Note [Resume at another world size] in
// apps/train_cifar/checkpoint_keeper.cpp): a mid-epoch checkpoint of 3 ranks continues on 2 and
// on 4 with the same global batch, step count and learning rate, and says so; a world size that
// does not split the global batch is refused with the sizes that would.
#include <gtest/gtest.h>

#include <filesystem>

#include "nn/checkpoint.h"
#include "tests/apps/train_cifar_runs.h"
#include "tests/support/temp_dir.h"

namespace tandem::apps {
namespace {

namespace fs = std::filesystem;
using testing::ProgramRun;
using testing::TempDir;

// One epoch of 8 steps of 24 images (3 ranks: 8 each), a save every 3 steps: the checkpoint
// before the last is the one of step 6, in the middle of the epoch.
std::vector<std::string> ddp_run(const std::string& log, const std::string& checkpoint, int ranks) {
  return quick_run(log, {"--subset",           "192",  "--batch-size", "24",
                         "--epochs",           "1",    "--mode",       "ddp",
                         "--backend",          "gloo", "--nproc",      std::to_string(ranks),
                         "--threads",          "1",    "--save",       checkpoint,
                         "--save-every-steps", "3",    "--resume",     "auto"});
}

TEST(TrainCifarElasticMultiprocess, AMidEpochCheckpointResumesAtAnotherWorldSize) {
  TempDir dir;
  const std::string whole_log = dir.file("whole.jsonl"), whole = dir.file("whole.ckpt");
  const ProgramRun three = train_cifar(ddp_run(whole_log, whole, 3));
  ASSERT_EQ(three.exit_code, 0) << three.output;
  const auto expected = epochs_of(read_log(whole_log));
  ASSERT_EQ(expected.size(), 1u);
  for (const int ranks : {2, 4}) {
    const std::string name = "resized" + std::to_string(ranks), ckpt = dir.file(name + ".ckpt");
    for (const std::string& file :
         {nn::previous_path(whole), nn::sidecar_path(nn::previous_path(whole))}) {
      fs::copy_file(file, file == nn::previous_path(whole) ? ckpt : nn::sidecar_path(ckpt));
    }
    const std::string log = dir.file(name + ".jsonl");
    const ProgramRun resumed = train_cifar(ddp_run(log, ckpt, ranks));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("resuming in epoch 1 at batch 6 of 8 (step 6, saved by 3 ranks, "
                                  "now " +
                                  std::to_string(ranks) + " ranks)"),
              std::string::npos)
        << resumed.output;
    const auto records = read_log(log);
    const auto resumes = records_of(records, "resume");
    ASSERT_EQ(resumes.size(), 1u);
    EXPECT_EQ(resumes[0]["world_size_from"], 3);
    EXPECT_EQ(resumes[0]["world_size_to"], ranks);
    EXPECT_EQ(resumes[0]["step"], 6);
    // The same global steps at the same learning rates: the epoch ends at step 8 as the 3 ranks'
    // did (its metrics differ: each rank's batch-norm statistics come from another share).
    const auto epochs = epochs_of(records);
    ASSERT_EQ(epochs.size(), 1u);
    EXPECT_EQ(epochs[0]["step"], expected[0]["step"]);
    EXPECT_DOUBLE_EQ(epochs[0]["lr"].get<double>(), expected[0]["lr"].get<double>());
  }
  // 24 images do not split over 5 ranks: 4 or 6 would.
  const ProgramRun five = train_cifar(ddp_run(dir.file("five.jsonl"), whole, 5));
  expect_one_error_line(five,
                        "--batch-size 24 does not split evenly over 5 ranks; use 20 or 25, "
                        "or keep it (as a resumed run must) on 4 or 6 ranks");
}

}  // namespace
}  // namespace tandem::apps
