// train_cifar refuses what cannot be meant, before any training step and in one line (the UX
// review's "bad" cases, ../shared/reviews/2026-11-26-ux.md §3: runs that exited 0 while doing
// the wrong thing or losing the work): a launcher's ranks without --mode ddp, outputs that cannot
// be written, --run-epochs without --save, a resume that would change the run's schedule, a
// finished run resumed, a wrong --arch, a rendezvous that cannot meet.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "tests/apps/train_cifar_runs.h"
#include "tests/support/small_disk.h"
#include "tests/support/temp_dir.h"

namespace tandem::apps {
namespace {

namespace fs = std::filesystem;
using testing::ProgramRun;
using testing::TempDir;

// train_cifar with variables set in its environment, as a launcher would set them.
ProgramRun train_cifar_with(const std::vector<std::string>& variables,
                            const std::vector<std::string>& args) {
  std::vector<std::string> command = variables;
  command.push_back(testing::kTrainCifarProgram);
  command.insert(command.end(), args.begin(), args.end());
  return testing::run_program("/usr/bin/env", command);
}

TEST(TrainCifarRefusals, ALaunchersRanksWithoutDdpAreRefused) {
  TempDir dir;
  const std::vector<std::string> run = quick_run(dir.file("log.jsonl"));
  expect_one_error_line(train_cifar_with({"RANK=1", "WORLD_SIZE=2"}, run),
                        "a launcher started this process as one of 2 (WORLD_SIZE), but --mode "
                        "single trains the whole job in each");
  std::vector<std::string> dp = run;
  dp.insert(dp.end(), {"--mode", "dp"});
  expect_one_error_line(train_cifar_with({"OMPI_COMM_WORLD_SIZE=4"}, dp), "add --mode ddp");
  std::vector<std::string> nproc = run;
  nproc.insert(nproc.end(), {"--nproc", "2"});
  expect_one_error_line(train_cifar(nproc),
                        "--nproc 2 starts ddp ranks, but the mode is single: add --mode ddp");
  std::vector<std::string> ddp = run;
  ddp.insert(ddp.end(), {"--mode", "ddp"});
  expect_one_error_line(train_cifar_with({"-u", "WORLD_SIZE", "RANK=0"}, ddp),
                        "RANK is set but WORLD_SIZE is not");
  expect_one_error_line(train_cifar_with({"-u", "RANK", "WORLD_SIZE=2"}, ddp),
                        "WORLD_SIZE is set but RANK is not");
  EXPECT_FALSE(fs::exists(dir.file("log.jsonl")));  // refused before anything was written
}

TEST(TrainCifarRefusals, OutputsThatCannotBeWrittenFailAtOnce) {
  TempDir dir;
  fs::create_directories(dir.file("a_folder"));
  const auto saving_to = [&](const std::string& path) {
    return train_cifar(quick_run(dir.file("log.jsonl"), {"--save", path}));
  };
  expect_one_error_line(saving_to(dir.file("a_folder")),
                        "--save " + dir.file("a_folder") + ": is a folder; name a file in it");
  expect_one_error_line(saving_to(dir.file("missing/run.ckpt")),
                        "the folder " + dir.file("missing") + " does not exist; create it first");
  expect_one_error_line(saving_to("/proc/run.ckpt"),
                        "--save /proc/run.ckpt: cannot write in /proc");
  EXPECT_TRUE(fs::is_empty(dir.file("a_folder")));  // no orphan sidecar beside it
  expect_one_error_line(train_cifar(quick_run(dir.file("a_folder"))),
                        "--log-json " + dir.file("a_folder") + ": is a folder");
  expect_one_error_line(train_cifar(quick_run(dir.file("log.jsonl"), {"--run-epochs", "1"})),
                        "--run-epochs stops early to continue later, which needs a checkpoint");
}

// Note [CIFAR-10 md5 check]: files that are not what their names say are refused before training,
// unless --no-verify-data says they are one's own. A subset folder, so the files can be small.
TEST(TrainCifarRefusals, DataFilesThatFailTheirMd5SumsNeedNoVerifyData) {
  TempDir dir;
  for (const char* name : {"data_batch_1.bin", "test_batch.bin"}) {
    std::ofstream file(dir.file(name), std::ios::binary);
    for (int i = 0; i < 64; ++i) file << static_cast<char>(i % 10) << std::string(3072, 'x');
  }
  std::ofstream(dir.file("subset.txt")) << "a test's subset\n";
  std::ofstream(dir.file("subset.md5")) << "d41d8cd98f00b204e9800998ecf8427e  data_batch_1.bin\n"
                                        << "d41d8cd98f00b204e9800998ecf8427e  test_batch.bin\n";
  const std::vector<std::string> run{
      "--data-dir",   dir.path().string(), "--subset", "32",        "--batch-size",
      "16",           "--epochs",          "1",        "--workers", "1",
      "--no-progress"};
  expect_one_error_line(train_cifar(run), "[cifar10] " + dir.file("data_batch_1.bin") +
                                              " does not match its md5 sum");
  expect_one_error_line(train_cifar(run), "is read with --no-verify-data");
  std::vector<std::string> own = run;
  own.push_back("--no-verify-data");
  const ProgramRun trained = train_cifar(own);
  EXPECT_EQ(trained.exit_code, 0) << trained.output;
}

// Ranks started by hand (--init-method, --rank, --world-size): what cannot meet is refused in one
// line, and one whose rank 0 is not there gives up within --timeout naming the address.
TEST(TrainCifarRefusals, ABadRendezvousIsOneLine) {
  TempDir dir;
  const auto ddp = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--mode", "ddp", "--backend", "gloo", "--timeout", "2"});
    return train_cifar(quick_run(dir.file("log.jsonl"), extra));
  };
  const std::string tcp = "tcp://127.0.0.1:29511";
  expect_one_error_line(ddp({"--init-method", "tcp://127.0.0.1"}),
                        "train_cifar: error: [init_method] 'tcp://127.0.0.1' has no port: "
                        "expected tcp://HOST:PORT");
  expect_one_error_line(ddp({"--init-method", "tcp//127.0.0.1:29511"}), "is not a URL");
  expect_one_error_line(ddp({"--init-method", tcp}),
                        "[init_method] " + tcp + " needs this process's rank and the world size");
  expect_one_error_line(ddp({"--init-method", tcp, "--rank", "0"}),
                        "needs this process's rank and the world size");
  expect_one_error_line(ddp({"--init-method", tcp, "--rank", "2", "--world-size", "2"}),
                        "[init_method] rank 2 is out of range for world size 2 (ranks are 0..1)");
  expect_one_error_line(ddp({"--rank", "1"}), "env:// takes a rank and a world size together");
  expect_one_error_line(
      ddp({"--init-method", tcp, "--rank", "0", "--world-size", "2", "--nproc", "2"}),
      "--nproc 2 starts ranks on this machine through env://, but a rank started by hand");
  expect_one_error_line(
      train_cifar(quick_run(dir.file("log.jsonl"),
                            {"--init-method", tcp, "--rank", "0", "--world-size", "2"})),
      "start ddp ranks, but the mode is single: add --mode ddp");
  const std::string missing = dir.file("no/such") + "/store";
  for (const char* rank : {"0", "1"}) {
    expect_one_error_line(
        ddp({"--init-method", "file://" + missing, "--rank", rank, "--world-size", "2"}),
        "[store] file://" + missing + ": the folder " + dir.file("no/such") + " does not exist");
  }
  // TEST-NET-1: nobody answers there. The rank gives up after --timeout, naming where it looked.
  const auto start = std::chrono::steady_clock::now();
  const ProgramRun unreachable =
      ddp({"--init-method", "tcp://192.0.2.1:29511", "--rank", "1", "--world-size", "2"});
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::seconds(2));  // the whole timeout, as the line says
  EXPECT_LT(waited, std::chrono::seconds(15));
  expect_one_error_line(
      unreachable, "[store] could not reach the rendezvous store at 192.0.2.1:29511 after 2 s");
  EXPECT_NE(unreachable.output.find("is tcp://192.0.2.1:29511 its address?"), std::string::npos)
      << unreachable.output;
  EXPECT_FALSE(fs::exists(dir.file("log.jsonl")));  // refused before anything was written
}

// Two checkpoints of ResNet-20 (weights, buffers, momentum) need about 4.4 MB; a 2 MB disk is
// refused before the first step, not after an epoch with an orphan sidecar.
TEST(TrainCifarRefusals, TooLittleSpaceForTwoCheckpointsFailsAtOnce) {
  TempDir dir;
  testing::SmallDisk disk(dir.file("small"), "2m");
  if (!disk.mounted()) GTEST_SKIP() << disk.reason();
  const ProgramRun run =
      train_cifar(quick_run(dir.file("log.jsonl"), {"--save", dir.file("small/run.ckpt")}));
  expect_one_error_line(run, "has 2.0 MB free, but 4.3 MB are needed; free some space");
  EXPECT_TRUE(fs::is_empty(dir.file("small")));
}

// Note [A resume knows its run].
class ResumeOfARun : public ::testing::Test {
 protected:
  void SetUp() override {
    const ProgramRun run = train_cifar(args({"--epochs", "2"}));
    ASSERT_EQ(run.exit_code, 0) << run.output;
  }
  std::vector<std::string> args(std::vector<std::string> extra) const {
    extra.insert(extra.end(), {"--save", checkpoint(), "--devices", "cpu:0"});
    return quick_run(dir_.file("log.jsonl"), extra);
  }
  std::string checkpoint() const { return dir_.file("run.ckpt"); }

  TempDir dir_;
};

TEST_F(ResumeOfARun, AFinishedRunIsNothingToTrain) {
  expect_one_error_line(train_cifar(args({"--epochs", "2", "--resume", checkpoint()})),
                        "nothing to train: " + checkpoint() +
                            " finished epoch 2 and --epochs is 2; raise --epochs to train on, or "
                            "use --eval-only");
  // What a restarting launcher runs again after the job's end: it says so, and succeeds.
  const ProgramRun again = train_cifar(args({"--epochs", "2", "--resume", "auto"}));
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("nothing to train: " + checkpoint() + " finished its 2 epochs"),
            std::string::npos)
      << again.output;
}

TEST_F(ResumeOfARun, AnotherScheduleIsRefusedNamingTheSavedValues) {
  expect_one_error_line(
      train_cifar({"--synthetic", "--subset", "256", "--batch-size", "64", "--schedule", "cosine",
                   "--epochs", "4", "--resume", checkpoint(), "--devices", "cpu:0"}),
      " was trained with --batch-size 32 --schedule multistep --lr 0.05; this run asks for "
      "--batch-size 64 --schedule cosine --lr 0.1, which would change the learning-rate schedule");
  expect_one_error_line(
      train_cifar(args({"--epochs", "4", "--arch", "resnet32", "--resume", checkpoint()})),
      "holds a resnet20, not a resnet32 (pass --arch resnet20)");
}

TEST_F(ResumeOfARun, MoreEpochsContinueWithAWarning) {
  const ProgramRun longer = train_cifar(args({"--epochs", "3", "--resume", checkpoint()}));
  ASSERT_EQ(longer.exit_code, 0) << longer.output;
  EXPECT_NE(longer.output.find("train_cifar: warning: " + checkpoint() +
                               " was trained with --epochs 2; this run uses 3: the learning-rate "
                               "schedule is stretched"),
            std::string::npos)
      << longer.output;
  EXPECT_EQ(epochs_of(read_log(dir_.file("log.jsonl"))).back()["epoch"], 3);
}

}  // namespace
}  // namespace tandem::apps
