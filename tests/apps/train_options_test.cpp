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
  EXPECT_EQ(o.setup.mode, Mode::Single);
  EXPECT_EQ(o.setup.arch, "resnet20");
  EXPECT_EQ(o.batch_size, 128);
  EXPECT_FLOAT_EQ(o.setup.sgd.lr, 0.1f);
  EXPECT_FLOAT_EQ(o.setup.sgd.momentum, 0.9f);
  EXPECT_FLOAT_EQ(o.setup.sgd.weight_decay, 1e-4f);
  EXPECT_EQ(o.schedule, Schedule::MultiStep);
  EXPECT_EQ(o.data_dir, "");  // the default places (Note [Default data folder])
  EXPECT_EQ(o.setup.ddp.reducer.bucket_cap_mb, parallel::ReducerOptions{}.bucket_cap_mb);
  EXPECT_EQ(o.setup.ddp.reducer.first_bucket_mb, parallel::ReducerOptions{}.first_bucket_mb);
  EXPECT_TRUE(o.setup.ddp.reducer.overlap);
  EXPECT_EQ(o.setup.memory_format, std::nullopt);  // auto
  EXPECT_EQ(o.backend, nullptr);
  EXPECT_FALSE(o.resume.given());
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
                                "--first-bucket-mb",
                                "0.5",
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
                                "--zero",
                                "2",
                                "--drop-last"});
  EXPECT_EQ(o.setup.mode, Mode::Distributed);
  EXPECT_EQ(o.setup.grad_compression, parallel::GradCompression::BFloat16);
  EXPECT_EQ(o.setup.ddp.sharding, parallel::Sharding::Gradients);
  EXPECT_TRUE(o.drop_last);
  EXPECT_EQ(o.setup.arch, "resnet56");
  EXPECT_EQ(o.nproc, 4);
  ASSERT_NE(o.backend, nullptr);
  EXPECT_STREQ(o.backend->name, "gloo");
  EXPECT_EQ(o.epochs, 3);
  EXPECT_EQ(o.run_epochs, 1);
  EXPECT_EQ(o.batch_size, 256);
  EXPECT_FLOAT_EQ(o.setup.sgd.lr, 0.2f);
  EXPECT_FLOAT_EQ(o.setup.sgd.momentum, 0.8f);
  EXPECT_TRUE(o.setup.sgd.nesterov);
  EXPECT_FLOAT_EQ(o.setup.sgd.weight_decay, 5e-4f);
  EXPECT_EQ(o.schedule, Schedule::Cosine);
  EXPECT_DOUBLE_EQ(o.warmup_epochs, 1.5);
  EXPECT_EQ(o.workers, 3);
  EXPECT_EQ(o.data_dir, "/d");
  EXPECT_EQ(o.subset, 1000);
  EXPECT_TRUE(o.synthetic);
  EXPECT_EQ(o.setup.seed, 9u);
  EXPECT_EQ(o.save, "a.ckpt");
  EXPECT_FALSE(o.resume.automatic);
  EXPECT_EQ(o.resume.path, "b.ckpt");
  EXPECT_DOUBLE_EQ(o.setup.ddp.reducer.bucket_cap_mb, 5);
  EXPECT_DOUBLE_EQ(o.setup.ddp.reducer.first_bucket_mb, 0.5);
  EXPECT_FALSE(o.setup.ddp.reducer.overlap);
  EXPECT_EQ(o.threads, 1);
  EXPECT_EQ(o.log_json, "m.jsonl");
  EXPECT_FALSE(o.progress);
  EXPECT_TRUE(o.setup.sync_bn);
  EXPECT_DOUBLE_EQ(o.timeout_s, 12.5);
  EXPECT_EQ(o.setup.memory_format, MemoryFormat::Contiguous);
  EXPECT_EQ(o.accumulate, 4);
  EXPECT_EQ(parse({"--mode", "dp", "--devices", "cpu:0,cpu:1"}).devices, "cpu:0,cpu:1");
}

// Note [Typed options]: each word a flag takes maps to its value, in any case.
TEST(TrainOptions, ChoicesAreParsedIntoTheirEnums) {
  for (const auto& [word, format] :
       std::vector<std::pair<const char*, std::optional<MemoryFormat>>>{
           {"auto", std::nullopt},
           {"channels_last", MemoryFormat::ChannelsLast},
           {"channels-last", MemoryFormat::ChannelsLast},
           {"nhwc", MemoryFormat::ChannelsLast},
           {"NHWC", MemoryFormat::ChannelsLast},
           {"contiguous", MemoryFormat::Contiguous},
           {"nchw", MemoryFormat::Contiguous}}) {
    EXPECT_EQ(parse({"--memory-format", word}).setup.memory_format, format) << word;
  }
  for (const auto& [word, schedule] :
       std::vector<std::pair<const char*, Schedule>>{{"multistep", Schedule::MultiStep},
                                                     {"cosine", Schedule::Cosine},
                                                     {"onecycle", Schedule::OneCycle},
                                                     {"OneCycle", Schedule::OneCycle}}) {
    EXPECT_EQ(parse({"--schedule", word}).schedule, schedule) << word;
    EXPECT_STREQ(schedule_name(schedule), word == std::string("OneCycle") ? "onecycle" : word);
  }
  EXPECT_EQ(parse({"--mode", "dp"}).setup.mode, Mode::DataParallel);
  EXPECT_EQ(parse({"--backend", "NCCL"}).backend, &parallel::find_backend("nccl"));
  EXPECT_EQ(parse({"--precision", "bf16"}).setup.precision, nn::Precision::BFloat16);
  EXPECT_EQ(parse({"--grad-compression", "fp16"}).setup.grad_compression,
            parallel::GradCompression::Float16);
  const TrainOptions automatic = parse({"--resume", "auto"});
  EXPECT_TRUE(automatic.resume.automatic);
  EXPECT_EQ(automatic.resume.path, "");
  EXPECT_TRUE(automatic.resume.given());
}

TEST(TrainOptions, BadFlagsAndValuesAreOneClearLine) {
  for (const auto& [args, expected] : std::vector<std::pair<std::vector<const char*>, std::string>>{
           {{"--bogus"}, "--bogus"},
           {{"--mode", "fast"}, "--mode: fast not in {single,dp,ddp}"},
           {{"--arch", "resnet19"}, "resnet19"},
           {{"--lr", "-1"}, "--lr"},
           {{"--batch-size", "0"}, "--batch-size"},
           {{"--epochs", "two"}, "--epochs"},
           {{"--schedule", "linear"}, "--schedule: linear not in {multistep,cosine,onecycle}"},
           {{"--memory-format", "nhcw"}, "--memory-format: nhcw not in {auto,channels_last,"},
           {{"--precision", "fp16"}, "--precision: fp16 not in {fp32,bf16}"},
           {{"--grad-compression", "int8"}, "--grad-compression: int8 not in {none,fp16,bf16}"},
           {{"--first-bucket-mb", "0"}, "--first-bucket-mb"},
           {{"--backend", "ucc"}, "--backend: ucc not in {nccl,gloo,mpi}"}}) {
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
  o.setup.ddp.reducer.overlap = false;
  EXPECT_NE(error_message([&] { validate(o, 1); }).find("are for --mode ddp"), std::string::npos);
  o = {};
  o.setup.sync_bn = true;
  EXPECT_NE(error_message([&] { validate(o, 1); }).find("--zero are for --mode ddp"),
            std::string::npos);
  o = {};
  o.setup.ddp.sharding = parallel::Sharding::Optimizer;
  EXPECT_NE(error_message([&] { validate(o, 1); }).find("--zero are for --mode ddp"),
            std::string::npos);
  o = {};
  o.setup.mode = Mode::Distributed;
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

// The tutorials' form: --init-method, --rank and --world-size make this process one rank started
// by hand; env:// alone leaves the ranks to a launcher or to --nproc.
TEST(TrainOptions, RanksStartedByHand) {
  const TrainOptions launched = parse({"--mode", "ddp"});
  EXPECT_EQ(launched.init_method, "env://");
  EXPECT_FALSE(started_by_hand(launched));
  const TrainOptions tcp = parse({"--mode", "ddp", "--init-method", "tcp://10.1.1.20:23456",
                                  "--rank", "1", "--world-size", "3"});
  EXPECT_TRUE(started_by_hand(tcp));
  const parallel::InitOptions init = init_options(tcp);
  EXPECT_EQ(init.init_method, "tcp://10.1.1.20:23456");
  EXPECT_EQ(init.rank, 1);
  EXPECT_EQ(init.world_size, 3);
  EXPECT_TRUE(started_by_hand(parse({"--mode", "ddp", "--rank", "0", "--world-size", "2"})));
  EXPECT_NE(parse_error({"--rank", "-1"}).find("--rank"), std::string::npos);
  EXPECT_NE(parse_error({"--world-size", "0"}).find("--world-size"), std::string::npos);
  const auto nothing = [](const std::string&) -> std::optional<std::string> { return {}; };
  validate_launch(tcp, nothing);
  EXPECT_NE(error_message([&] {
              validate_launch(parse({"--mode", "ddp", "--init-method", "file:///x"}), nothing);
            }).find("[init_method] file:///x needs this process's rank and the world size"),
            std::string::npos);
  // MPI's ranks come from mpirun, never from a store.
  EXPECT_NE(error_message([&] {
              validate_launch(parse({"--mode", "ddp", "--backend", "mpi", "--init-method",
                                     "tcp://10.1.1.20:23456", "--rank", "1", "--world-size", "3"}),
                              nothing);
            }).find("[train_cifar] --backend mpi: mpirun starts the ranks"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::apps
