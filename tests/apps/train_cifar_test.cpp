// train_cifar as a user runs it: the program itself, in a child process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "engine/cpu_features.h"
#include "engine/device_runtime.h"
#include "tests/apps/train_cifar_runs.h"
#include "tests/support/cuda_skip.h"
#include "tests/support/run_program.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_paths.h"

namespace tandem::apps {
namespace {

using nlohmann::json;
using testing::ProgramRun;
using testing::TempDir;

void expect_loss_falls(const std::vector<std::string>& mode_args) {
  TempDir dir;
  std::vector<std::string> args = quick_run(dir.file("log.jsonl"), {"--epochs", "3"});
  args.insert(args.end(), mode_args.begin(), mode_args.end());
  const ProgramRun run = train_cifar(args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto epochs = epochs_of(read_log(dir.file("log.jsonl")));
  ASSERT_EQ(epochs.size(), 3u) << run.output;
  EXPECT_LT(epochs[2]["train_loss"].get<double>(), epochs[0]["train_loss"].get<double>() - 0.3)
      << run.output;
  EXPECT_GT(epochs[2]["test_accuracy"].get<double>(), 0.3) << run.output;  // chance is 0.1
}

TEST(TrainCifar, SingleDeviceLossFalls) {
  expect_loss_falls({"--mode", "single"});
}

TEST(TrainCifar, DataParallelLossFalls) {
  expect_loss_falls({"--mode", "dp", "--devices", "cpu:0,cpu:1"});
}

// As PyTorch's DataParallel takes every visible GPU; without one, two CPU devices (as bench_cifar's
// dp x2), since one would be no DataParallel at all.
TEST(TrainCifar, DataParallelDefaultsToEveryGpuElseTwoCpuDevices) {
  const ProgramRun run =
      train_cifar({"--synthetic", "--subset", "64", "--batch-size", "32", "--epochs", "1",
                   "--workers", "0", "--no-progress", "--mode", "dp"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string expected =
      cuda_available() ? "mode dp on " + std::to_string(cuda_runtime().device_count()) + " devices"
                       : "mode dp on 2 devices (cpu:0,cpu:1)";
  EXPECT_NE(run.output.find(expected), std::string::npos) << run.output;
}

// Note [Host syncs]: the trainer reads its losses every 10 steps and nothing else in a step
// (Note [Counting host reads]: batch norm's counter, say, would add 21 reads to every step).
TEST(TrainCifar, AnEpochReadsTheHostOnlyEveryTenSteps) {
  TempDir dir;
  // 640 images at 32 a batch: 20 steps, so 2 reads.
  const ProgramRun run = train_cifar({"--synthetic", "--subset", "640", "--batch-size", "32",
                                      "--epochs", "1", "--mode", "single", "--workers", "1",
                                      "--no-progress", "--log-json", dir.file("log.jsonl")});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto epochs = epochs_of(read_log(dir.file("log.jsonl")));
  ASSERT_EQ(epochs.size(), 1u) << run.output;
  EXPECT_EQ(epochs[0]["step"].get<int64_t>(), 20);
  EXPECT_EQ(epochs[0]["host_reads"].get<int64_t>(), 2);
}

// The TrainCifarMultiprocess tests name Gloo: on CPUs whatever the machine (the default, nccl
// where CUDA runs, would need a GPU per rank; TrainCifarGpu.* run that).
TEST(TrainCifarMultiprocess, DistributedLossFalls) {
  expect_loss_falls({"--mode", "ddp", "--backend", "gloo", "--nproc", "2", "--threads", "1"});
}

// Note [All-rank progress]: rank 0's progress line shows the loss and accuracy over every rank's
// images, so the epoch's last one agrees with the epoch's line (rank 0's share alone would not).
TEST(TrainCifarMultiprocess, TheProgressShowsEveryRanksLossAndAccuracy) {
  TempDir dir;
  std::vector<std::string> args = quick_run(dir.file("log.jsonl"), {"--epochs", "1"});
  args.insert(args.end(), {"--mode", "ddp", "--backend", "gloo", "--nproc", "2", "--threads", "1"});
  const ProgramRun run = train_cifar(args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::smatch progress, epoch;
  ASSERT_TRUE(
      std::regex_search(run.output, progress,
                        std::regex(R"(\[rank 0\] epoch 1/1 8/8 loss ([0-9.]+) acc ([0-9.]+)%)")))
      << run.output;
  ASSERT_TRUE(
      std::regex_search(run.output, epoch,
                        std::regex(R"(\[rank 0\] epoch 1/1: train loss ([0-9.]+) acc ([0-9.]+)%)")))
      << run.output;
  EXPECT_EQ(progress[1], epoch[1]) << run.output;
  EXPECT_NEAR(std::stod(progress[2]), std::stod(epoch[2]), 0.051) << run.output;
}

// As a PyTorch script picks its backend: gloo without a GPU, nccl where CUDA runs, which needs
// a GPU per rank: a one-GPU machine says so in one line before any rank starts.
TEST(TrainCifarMultiprocess, DistributedDefaultsToGlooWithoutAGpuAndNeedsAGpuPerRankWithOne) {
  const int gpus = cuda_available() ? cuda_runtime().device_count() : 0;
  if (gpus >= 2) GTEST_SKIP() << "two ranks fit this machine's GPUs (TrainCifarGpu.* run them)";
  const ProgramRun run = train_cifar({"--synthetic", "--subset", "64", "--batch-size", "32",
                                      "--epochs", "1", "--workers", "0", "--no-progress", "--mode",
                                      "ddp", "--nproc", "2", "--threads", "1"});
  if (gpus == 1) {
    expect_one_error_line(run,
                          "[ddp] 2 ranks on this node need 2 GPUs, 1 is visible; use --backend "
                          "gloo to run them on CPUs, or --nproc 1");
    return;
  }
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("mode ddp on 2 ranks, gloo on cpu:0"), std::string::npos) << run.output;
}

// End to end on GPUs, in each mode (the CUDA review found no GPU run of train_cifar at all): dp
// over every GPU (its default there), ddp with one NCCL rank per GPU.
TEST(TrainCifarGpu, SingleGpuLossFalls) {
  TANDEM_SKIP_WITHOUT_CUDA();
  expect_loss_falls({"--mode", "single", "--devices", "cuda:0"});
}

TEST(TrainCifarGpu, DataParallelOverEveryGpuLossFalls) {
  TANDEM_SKIP_WITHOUT_CUDA();
  expect_loss_falls({"--mode", "dp"});
}

TEST(TrainCifarGpu, DistributedOverNcclLossFalls) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const int gpus = cuda_runtime().device_count();
  expect_loss_falls({"--mode", "ddp", "--backend", "nccl", "--nproc", std::to_string(gpus)});
}

TEST(TrainCifar, AccumulationStepsOncePerGroupOfMicroBatches) {
  // 8 batches an epoch in groups of 3: optimizer steps 3, 3, 2 (Note [Accumulation]).
  TempDir dir;
  std::vector<std::string> args =
      quick_run(dir.file("log.jsonl"), {"--epochs", "2", "--accumulate", "3"});
  const ProgramRun run = train_cifar(args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto epochs = epochs_of(read_log(dir.file("log.jsonl")));
  ASSERT_EQ(epochs.size(), 2u) << run.output;
  EXPECT_EQ(epochs[0]["step"].get<int64_t>(), 3) << run.output;
  EXPECT_EQ(epochs[1]["step"].get<int64_t>(), 6) << run.output;
  EXPECT_LT(epochs[1]["train_loss"].get<double>(), epochs[0]["train_loss"].get<double>())
      << run.output;
}

TEST(TrainCifarMultiprocess, DistributedAccumulationLossFalls) {
  expect_loss_falls({"--mode", "ddp", "--backend", "gloo", "--nproc", "2", "--threads", "1",
                     "--accumulate", "2"});
}

TEST(TrainCifarMultiprocess, DistributedWithSyncBatchNormLossFalls) {
  expect_loss_falls(
      {"--mode", "ddp", "--backend", "gloo", "--nproc", "2", "--threads", "1", "--sync-bn"});
}

// 257 images over 2 ranks of 16: shares of 129 and 128 images, 9 and 8 batches. Rank 1 joins
// for the last step (Note [Join protocol]); the schedule counts rank 0's 9 steps on every rank.
// DDP with SyncBatchNorm against one process, end to end: the same global batches augmented alike
// (Note [Augmentation per image]), batch statistics over the global batch, averaged gradients.
// Only the order of floating-point sums differs, so the training losses stay close.
TEST(TrainCifarMultiprocess, DistributedWithSyncBatchNormTracksOneProcess) {
  TempDir dir;
  const auto run_mode = [&](const std::string& name, std::vector<std::string> mode_args) {
    mode_args.insert(mode_args.end(), {"--epochs", "2", "--threads", "1"});
    const ProgramRun run = train_cifar(quick_run(dir.file(name), mode_args));
    EXPECT_EQ(run.exit_code, 0) << run.output;
    return epochs_of(read_log(dir.file(name)));
  };
  const auto single = run_mode("single.jsonl", {"--mode", "single", "--devices", "cpu:0"});
  const auto ddp =
      run_mode("ddp.jsonl", {"--mode", "ddp", "--backend", "gloo", "--nproc", "2", "--sync-bn"});
  ASSERT_EQ(single.size(), 2u);
  ASSERT_EQ(ddp.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_NEAR(ddp[e]["train_loss"].get<double>(), single[e]["train_loss"].get<double>(), 0.03)
        << "epoch " << e + 1;
  }
}

TEST(TrainCifarMultiprocess, DistributedUnevenSharesJoinInsteadOfPadding) {
  TempDir dir;
  const ProgramRun run = train_cifar({"--synthetic", "--subset",
                                      "257",         "--batch-size",
                                      "32",          "--workers",
                                      "1",           "--no-progress",
                                      "--log-json",  dir.file("log.jsonl"),
                                      "--lr",        "0.05",
                                      "--epochs",    "3",
                                      "--mode",      "ddp",
                                      "--backend",   "gloo",
                                      "--nproc",     "2",
                                      "--threads",   "1",
                                      "--save",      dir.file("run.ckpt")});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("uneven shares joined"), std::string::npos) << run.output;
  const auto epochs = epochs_of(read_log(dir.file("log.jsonl")));
  ASSERT_EQ(epochs.size(), 3u) << run.output;
  EXPECT_EQ(epochs[0]["step"].get<int64_t>(), 9) << run.output;
  EXPECT_EQ(epochs[2]["step"].get<int64_t>(), 27) << run.output;
  EXPECT_LT(epochs[2]["train_loss"].get<double>(), epochs[0]["train_loss"].get<double>() - 0.3)
      << run.output;
}

TEST(TrainCifarMultiprocess, DistributedWithBf16GradientsLossFalls) {
  expect_loss_falls({"--mode", "ddp", "--backend", "gloo", "--nproc", "2", "--threads", "1",
                     "--grad-compression", "bf16"});
}

// bf16 runs pass --allow-slow-bf16, so that they also run (emulated) on CPUs without
// AVX512-BF16; on those with it the flag changes nothing.
const std::vector<std::string> kBf16{"--precision", "bf16", "--allow-slow-bf16"};

TEST(TrainCifar, Bf16LossFallsAndIsLogged) {
  TempDir dir;
  std::vector<std::string> args = quick_run(dir.file("log.jsonl"), {"--epochs", "3"});
  args.insert(args.end(), kBf16.begin(), kBf16.end());
  const ProgramRun run = train_cifar(args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find(", bf16\n"), std::string::npos) << "the header names it";
  const auto log = read_log(dir.file("log.jsonl"));
  const auto epochs = epochs_of(log);
  ASSERT_EQ(epochs.size(), 3u) << run.output;
  EXPECT_EQ(epochs[0]["precision"], "bf16");
  EXPECT_EQ(log.back()["precision"], "bf16");
  EXPECT_LT(epochs[2]["train_loss"].get<double>(), epochs[0]["train_loss"].get<double>() - 0.3);
  EXPECT_GT(epochs[2]["test_accuracy"].get<double>(), 0.3) << run.output;
}

TEST(TrainCifarMultiprocess, DistributedBf16WithBf16GradientsLossFalls) {
  std::vector<std::string> args{"--mode",    "ddp", "--backend",          "gloo", "--nproc", "2",
                                "--threads", "1",   "--grad-compression", "bf16"};
  args.insert(args.end(), kBf16.begin(), kBf16.end());
  expect_loss_falls(args);
}

TEST(TrainCifar, Bf16WithoutBf16InstructionsStopsWithOneLineUnlessAllowed) {
  // oneDNN capped at AVX2 is the CPU of a Zen 3 day: no AVX512-BF16, no AMX.
  const auto capped = [](std::vector<std::string> args) {
    args.insert(args.begin(), {"ONEDNN_MAX_CPU_ISA=AVX2", testing::kTrainCifarProgram});
    return testing::run_program("env", args);
  };
  TempDir dir;
  expect_one_error_line(
      capped({"--synthetic", "--precision", "bf16"}),
      "[precision] bf16 needs AVX512-BF16 (or AMX) on this CPU, which has only avx2");
  const ProgramRun forced =
      capped({"--synthetic", "--subset", "64", "--batch-size", "32", "--epochs", "1",
              "--no-progress", "--precision", "bf16", "--allow-slow-bf16"});
  EXPECT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_EQ(capped({"--synthetic", "--subset", "64", "--batch-size", "32", "--epochs", "1",
                    "--no-progress", "--precision", "fp32"})
                .exit_code,
            0);
}

// Note [Where bf16 pays]: oneDNN capped at AVX512_CORE_BF16 is the CPU of an Intel day without
// AMX (bf16 refused: slower than fp32) on an Intel machine, and a Zen 4 on an AMD one (bf16 runs).
// A machine without AVX512-BF16 stays what it is (emulated: refused as above).
TEST(TrainCifar, Bf16StopsWithOneLineWhereItIsSlowerThanFp32) {
  const std::string capped_isa = cpu_has_native_bf16() ? "avx512_core_bf16" : cpu_kernel_isa();
  const Bf16Verdict verdict = bf16_verdict(cpu_vendor(), capped_isa);
  const ProgramRun run = testing::run_program(
      "env", {"ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16", testing::kTrainCifarProgram, "--synthetic",
              "--subset", "64", "--batch-size", "32", "--epochs", "1", "--no-progress",
              "--precision", "bf16"});
  switch (verdict.speed) {
    case Bf16Speed::Faster: EXPECT_EQ(run.exit_code, 0) << run.output; break;
    case Bf16Speed::Slower:
      expect_one_error_line(run, "[precision] bf16 is slower than fp32 on this CPU (" +
                                     verdict.reason +
                                     "); use --precision fp32, or --allow-slow-bf16 to run it "
                                     "anyway");
      break;
    case Bf16Speed::Emulated:
      expect_one_error_line(run, "[precision] bf16 needs AVX512-BF16 (or AMX) on this CPU");
      break;
  }
}

// The weights are float32 in either precision, so a run may change precision when it resumes.
TEST(TrainCifar, CheckpointsResumeAcrossPrecisions) {
  TempDir dir;
  const std::string checkpoint = dir.file("run.ckpt");
  std::vector<std::string> first = quick_run(
      dir.file("log.jsonl"), {"--epochs", "3", "--run-epochs", "1", "--save", checkpoint});
  first.insert(first.end(), kBf16.begin(), kBf16.end());
  ASSERT_EQ(train_cifar(first).exit_code, 0);
  const ProgramRun in_fp32 = train_cifar(
      quick_run(dir.file("log.jsonl"), {"--epochs", "3", "--run-epochs", "1", "--resume",
                                        checkpoint, "--save", checkpoint, "--precision", "fp32"}));
  ASSERT_EQ(in_fp32.exit_code, 0) << in_fp32.output;
  std::vector<std::string> last =
      quick_run(dir.file("log.jsonl"), {"--epochs", "3", "--resume", checkpoint});
  last.insert(last.end(), kBf16.begin(), kBf16.end());
  const ProgramRun in_bf16 = train_cifar(last);
  ASSERT_EQ(in_bf16.exit_code, 0) << in_bf16.output;
  const auto epochs = epochs_of(read_log(dir.file("log.jsonl")));
  ASSERT_EQ(epochs.size(), 3u);
  EXPECT_EQ(epochs[0]["precision"], "bf16");
  EXPECT_EQ(epochs[1]["precision"], "fp32");
  EXPECT_EQ(epochs[2]["precision"], "bf16");
  EXPECT_EQ(epochs[2]["step"].get<int64_t>(), 24);
  EXPECT_LT(epochs[2]["train_loss"].get<double>(), epochs[0]["train_loss"].get<double>() - 0.3);
}

// On the CPU, whose kernels are deterministic (cuDNN's need TANDEM_CUDNN_DETERMINISTIC=1).
TEST(TrainCifar, ResumeContinuesExactlyWhereARunStopped) {
  TempDir dir;
  const ProgramRun whole =
      train_cifar(quick_run(dir.file("whole.jsonl"), {"--epochs", "2", "--devices", "cpu:0"}));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const std::string checkpoint = dir.file("run.ckpt");
  const ProgramRun first =
      train_cifar(quick_run(dir.file("split.jsonl"), {"--epochs", "2", "--run-epochs", "1",
                                                      "--save", checkpoint, "--devices", "cpu:0"}));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("continue: " + std::string(testing::kTrainCifarProgram)),
            std::string::npos)
      << first.output;
  EXPECT_NE(first.output.find(" --resume " + checkpoint + "\n"), std::string::npos) << first.output;
  const ProgramRun second =
      train_cifar(quick_run(dir.file("split.jsonl"), {"--epochs", "2", "--resume", checkpoint,
                                                      "--save", checkpoint, "--devices", "cpu:0"}));
  ASSERT_EQ(second.exit_code, 0) << second.output;

  const auto actual = epochs_of(read_log(dir.file("split.jsonl")));
  ASSERT_EQ(actual.size(), 2u);
  expect_same_epochs(actual, epochs_of(read_log(dir.file("whole.jsonl"))));
  // The checkpoint evaluates to the logged accuracy.
  const ProgramRun eval = train_cifar(quick_run(
      dir.file("eval.jsonl"), {"--resume", checkpoint, "--eval-only", "--devices", "cpu:0"}));
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_DOUBLE_EQ(read_log(dir.file("eval.jsonl")).at(0)["test_accuracy"].get<double>(),
                   actual[1]["test_accuracy"].get<double>());
  // Evaluation needs the weights alone (the UX review's case 29): without the .state too.
  std::filesystem::remove(checkpoint + ".state");
  const ProgramRun weights_only = train_cifar(quick_run(
      dir.file("eval2.jsonl"), {"--resume", checkpoint, "--eval-only", "--devices", "cpu:0"}));
  ASSERT_EQ(weights_only.exit_code, 0) << weights_only.output;
  EXPECT_DOUBLE_EQ(read_log(dir.file("eval2.jsonl")).at(0)["test_accuracy"].get<double>(),
                   actual[1]["test_accuracy"].get<double>());
  // A folder is not a checkpoint (case 28: it was called "truncated").
  expect_one_error_line(
      train_cifar({"--synthetic", "--resume", dir.path().string(), "--eval-only"}),
      " is a folder: name the checkpoint file that --save wrote");
}

}  // namespace
}  // namespace tandem::apps
