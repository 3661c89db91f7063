#include <gtest/gtest.h>

#include "apps/train_cifar/train_options.h"
#include "tests/support/error_message.h"

namespace tandem::apps {
namespace {

using testing::error_message;

TrainOptions parse(std::vector<const char*> args) {
  args.insert(args.begin(), "train_cifar");
  TrainOptions options;
  EXPECT_TRUE(parse_train_options(static_cast<int>(args.size()), args.data(), options));
  return options;
}

std::string parse_error(std::vector<const char*> args) {
  return error_message([&] { parse(args); });
}

TEST(TrainOptions, DefaultsAreThePapersRecipe) {
  const TrainOptions o = parse({});
  EXPECT_EQ(o.mode, Mode::Single);
  EXPECT_EQ(o.arch, "resnet20");
  EXPECT_EQ(o.batch_size, 128);
  EXPECT_FLOAT_EQ(o.lr, 0.1f);
  EXPECT_FLOAT_EQ(o.momentum, 0.9f);
  EXPECT_FLOAT_EQ(o.weight_decay, 1e-4f);
  EXPECT_EQ(o.schedule, "multistep");
  EXPECT_EQ(o.data_dir, "./data/cifar-10-batches-bin");
}

TEST(TrainOptions, ParsesEveryFlag) {
  const TrainOptions o = parse({"--mode",
                                "ddp",
                                "--arch",
                                "resnet56",
                                "--nproc",
                                "4",
                                "--backend",
                                "gloo",
                                "--epochs",
                                "3",
                                "--run-epochs",
                                "1",
                                "--batch-size",
                                "256",
                                "--lr",
                                "0.2",
                                "--momentum",
                                "0.8",
                                "--nesterov",
                                "--weight-decay",
                                "5e-4",
                                "--schedule",
                                "cosine",
                                "--warmup-epochs",
                                "1.5",
                                "--workers",
                                "3",
                                "--data-dir",
                                "/d",
                                "--subset",
                                "1000",
                                "--synthetic",
                                "--seed",
                                "9",
                                "--save",
                                "a.ckpt",
                                "--resume",
                                "b.ckpt",
                                "--bucket-cap-mb",
                                "5",
                                "--no-overlap",
                                "--threads",
                                "1",
                                "--log-json",
                                "m.jsonl",
                                "--no-progress",
                                "--sync-bn",
                                "--timeout",
                                "12.5",
                                "--memory-format",
                                "nchw",
                                "--accumulate",
                                "4",
                                "--grad-compression",
                                "bf16",
                                "--drop-last"});
  EXPECT_EQ(o.mode, Mode::Distributed);
  EXPECT_EQ(o.grad_compression, "bf16");
  EXPECT_TRUE(o.drop_last);
  EXPECT_EQ(o.arch, "resnet56");
  EXPECT_EQ(o.nproc, 4);
  EXPECT_EQ(o.backend, "gloo");
  EXPECT_EQ(o.epochs, 3);
  EXPECT_EQ(o.run_epochs, 1);
  EXPECT_EQ(o.batch_size, 256);
  EXPECT_FLOAT_EQ(o.lr, 0.2f);
  EXPECT_FLOAT_EQ(o.momentum, 0.8f);
  EXPECT_TRUE(o.nesterov);
  EXPECT_FLOAT_EQ(o.weight_decay, 5e-4f);
  EXPECT_EQ(o.schedule, "cosine");
  EXPECT_DOUBLE_EQ(o.warmup_epochs, 1.5);
  EXPECT_EQ(o.workers, 3);
  EXPECT_EQ(o.data_dir, "/d");
  EXPECT_EQ(o.subset, 1000);
  EXPECT_TRUE(o.synthetic);
  EXPECT_EQ(o.seed, 9u);
  EXPECT_EQ(o.save, "a.ckpt");
  EXPECT_EQ(o.resume, "b.ckpt");
  EXPECT_DOUBLE_EQ(o.bucket_cap_mb, 5);
  EXPECT_TRUE(o.no_overlap);
  EXPECT_EQ(o.threads, 1);
  EXPECT_EQ(o.log_json, "m.jsonl");
  EXPECT_FALSE(o.progress);
  EXPECT_TRUE(o.sync_bn);
  EXPECT_DOUBLE_EQ(o.timeout_s, 12.5);
  EXPECT_EQ(o.memory_format, "nchw");
  EXPECT_EQ(o.accumulate, 4);
  EXPECT_EQ(parse({"--mode", "dp", "--devices", "cpu:0,cpu:1"}).devices, "cpu:0,cpu:1");
}

TEST(TrainOptions, BadFlagsAndValuesAreOneClearLine) {
  for (const auto& [args, expected] : std::vector<std::pair<std::vector<const char*>, std::string>>{
           {{"--bogus"}, "--bogus"},
           {{"--mode", "fast"}, "--mode: fast not in {single,dp,ddp}"},
           {{"--arch", "resnet19"}, "resnet19"},
           {{"--lr", "-1"}, "--lr"},
           {{"--batch-size", "0"}, "--batch-size"},
           {{"--epochs", "two"}, "--epochs"},
           {{"--schedule", "linear"}, "linear"},
           {{"--backend", "mpi"}, "mpi"}}) {
    const std::string message = parse_error(args);
    EXPECT_NE(message.find("[train_cifar]"), std::string::npos) << message;
    EXPECT_NE(message.find(expected), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(TrainOptions, CombinationsAreChecked) {
  TrainOptions o;
  o.eval_only = true;
  EXPECT_NE(error_message([&] { validate(o, 1); }).find("--eval-only needs a checkpoint"),
            std::string::npos);
  o = {};
  o.no_overlap = true;
  EXPECT_NE(error_message([&] { validate(o, 1); }).find("are for --mode ddp"), std::string::npos);
  o = {};
  o.sync_bn = true;
  EXPECT_NE(error_message([&] { validate(o, 1); }).find("--grad-compression are for --mode ddp"),
            std::string::npos);
  o = {};
  o.mode = Mode::Distributed;
  o.batch_size = 100;
  EXPECT_NE(error_message([&] {
              validate(o, 3);
            }).find("--batch-size 100 does not split evenly over 3 ranks"),
            std::string::npos);
  o.batch_size = 99;
  o.subset = 2;
  EXPECT_NE(error_message([&] {
              validate(o, 3);
            }).find("--subset 2 leaves fewer training images than the 3 ranks"),
            std::string::npos);
}

// The ranks train_cifar starts itself share its CUDA_VISIBLE_DEVICES, so each needs a GPU of the
// ones visible (Note [NCCL device]): a one-GPU machine says so before any rank starts.
TEST(TrainOptions, LocalNcclRanksNeedAVisibleGpuEach) {
  EXPECT_EQ(local_ranks_gpu_problem(2, 1),
            "[ddp] 2 ranks on this node need 2 GPUs, 1 is visible; use --backend gloo to run "
            "them on CPUs, or --nproc 1");
  EXPECT_EQ(local_ranks_gpu_problem(4, 2),
            "[ddp] 4 ranks on this node need 4 GPUs, 2 are visible; use --backend gloo to run "
            "them on CPUs, or --nproc 2");
  EXPECT_EQ(local_ranks_gpu_problem(1, 0),
            "[ddp] 1 rank on this node needs 1 GPU, 0 are visible; use --backend gloo to run "
            "them on CPUs");
  EXPECT_EQ(local_ranks_gpu_problem(1, 1), "");
  EXPECT_EQ(local_ranks_gpu_problem(2, 2), "");
  EXPECT_EQ(local_ranks_gpu_problem(2, 8), "");
}

}  // namespace
}  // namespace tandem::apps
