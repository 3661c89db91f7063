// The Trainer's two helpers on their own: the RunReport, silent where it is not enabled (Note [One
// rank speaks]), and the CheckpointKeeper's cadence and save-resume round trip.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/train_cifar/checkpoint_keeper.h"
#include "apps/train_cifar/run_report.h"
#include "nn/checkpoint.h"
#include "tests/support/temp_dir.h"

namespace tandem::apps {
namespace {

std::vector<std::string> record_types(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> types;
  for (std::string line; std::getline(in, line);) {
    types.push_back(nlohmann::json::parse(line).at("type").get<std::string>());
  }
  return types;
}

TrainingSetup cpu_setup() {
  return make_training_setup({}, {Device::cpu()}, nullptr);
}

// Every call a run makes, in a run's order.
void speak(RunReport& report, const TrainingSetup& setup) {
  const RunShape shape{.setup = &setup, .train_images = 100, .test_images = 20};
  report.print_header(shape, RunPosition{.epoch = 1, .step = 5});
  report.print_warnings(shape);
  report.warn("train_cifar: warning: a line");
  report.log_position("resume", RunPosition{.epoch = 1, .step = 5});
  report.start_clock(1);
  const PassMetrics pass{.loss = 1, .accuracy = 0.5, .images = 100, .seconds = 1};
  report.report_epoch(1, 0.1f, 10, pass, pass);
  report.print_interrupted(1);
  report.print_summary(RunSummary{.epochs_done = 1}, 2);
}

TEST(RunReport, OnlyTheEnabledReportPrintsAndLogs) {
  const testing::TempDir dir;
  const TrainingSetup setup = cpu_setup();
  TrainOptions options;
  options.log_json = dir.file("metrics.jsonl");

  RunReport quiet(options, /*world=*/2, /*enabled=*/false, /*append_log=*/false);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  speak(quiet, setup);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_FALSE(quiet.epoch_progress(0, 10, 0).has_value());
  EXPECT_FALSE(std::filesystem::exists(options.log_json));  // not even opened

  RunReport speaking(options, /*world=*/2, /*enabled=*/true, /*append_log=*/false);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  speak(speaking, setup);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(::testing::internal::GetCapturedStderr().rfind("train_cifar: warning: a line\n", 0),
            0u);
  EXPECT_NE(out.find("train_cifar: resnet20 ("), std::string::npos) << out;
  EXPECT_NE(out.find("resuming after epoch 1 (step 5)"), std::string::npos) << out;
  EXPECT_NE(out.find("epoch 2/10: train loss 1.0000"), std::string::npos) << out;
  EXPECT_NE(out.find("interrupted during epoch 2; nothing was saved (no --save)"),
            std::string::npos)
      << out;
  EXPECT_TRUE(speaking.epoch_progress(0, 10, 0).has_value());
  EXPECT_EQ(record_types(options.log_json),
            (std::vector<std::string>{"resume", "epoch", "summary"}));
}

// Note [Mid-epoch checkpoints]: between optimizer steps only, never at the epoch's last batch
// (that save is the epoch's own), and under a Join only while every rank still has batches.
TEST(CheckpointKeeper, SavesMidEpochBetweenStepsWhileEveryRankTrains) {
  TrainOptions options;
  options.save = "unused.ckpt";
  options.save_every_steps = 2;
  options.accumulate = 2;
  RunReport report(options, 1, false, false);
  const CheckpointKeeper keeper(options, nullptr, report, "");
  const EpochShares even{.batches_per_epoch = 10, .batches_all_ranks_have = 10};
  EXPECT_TRUE(keeper.mid_epoch_save_due(/*step=*/2, /*batches_done=*/4, even));
  EXPECT_FALSE(keeper.mid_epoch_save_due(3, 6, even));   // not a multiple of --save-every-steps
  EXPECT_FALSE(keeper.mid_epoch_save_due(2, 5, even));   // inside an --accumulate group
  EXPECT_FALSE(keeper.mid_epoch_save_due(4, 10, even));  // the epoch's last batch
  const EpochShares uneven{.uneven = true, .batches_per_epoch = 10, .batches_all_ranks_have = 8};
  EXPECT_TRUE(keeper.mid_epoch_save_due(2, 4, uneven));
  EXPECT_FALSE(keeper.mid_epoch_save_due(4, 8, uneven));  // a rank has joined
  options.save_every_steps = 0;
  EXPECT_FALSE(CheckpointKeeper(options, nullptr, report, "").mid_epoch_save_due(2, 4, even));
}

TEST(CheckpointKeeper, AResumeStartsWhereTheSaveWas) {
  const testing::TempDir dir;
  TrainOptions options;
  options.save = dir.file("run.ckpt");
  options.log_json = dir.file("metrics.jsonl");
  RunReport report(options, 1, /*enabled=*/true, false);
  CheckpointKeeper saver(options, nullptr, report, "");
  EXPECT_FALSE(saver.resumes());
  TrainingSetup setup = cpu_setup();
  setup.network->parameters().front().fill_(0.25);  // unlike a fresh network's
  saver.check_outputs(*setup.network);
  const RunPosition position{
      .epoch = 2, .batch = 3, .step = 23, .so_far = {.loss_sum = 7.5, .correct = 9, .images = 12}};
  saver.save(position, setup);
  ASSERT_TRUE(nn::has_checkpoint(options.save));
  EXPECT_EQ(record_types(options.log_json), std::vector<std::string>{"checkpoint"});

  CheckpointKeeper resumer(options, nullptr, report, options.save);
  EXPECT_TRUE(resumer.resumes());
  TrainingSetup fresh = cpu_setup();
  resumer.resume(*fresh.network, *fresh.optimizer);
  EXPECT_EQ(resumer.start().epoch, 2);
  EXPECT_EQ(resumer.start().batch, 3);
  EXPECT_EQ(resumer.start().step, 23);
  EXPECT_DOUBLE_EQ(resumer.start().so_far.loss_sum, 7.5);
  EXPECT_EQ(resumer.start().so_far.images, 12);
  for (float weight : fresh.network->parameters().front().to_vector<float>()) {
    ASSERT_EQ(weight, 0.25f);
  }
}

}  // namespace
}  // namespace tandem::apps
