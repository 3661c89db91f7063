// train_cifar's resume after a fault: --resume auto, mid-epoch checkpoints (--save-every-steps)
// and their promise (Note [Mid-epoch checkpoints]): a run killed at any moment and resumed ends
// with the very weights of the run that was never killed. On the CPU, whose kernels are
// deterministic. The multi-process and launcher cases are in tests/scripts/fault_restart_test.sh.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>

#include "nn/checkpoint.h"
#include "nn/safetensors.h"
#include "tests/apps/train_cifar_runs.h"
#include "tests/support/temp_dir.h"

namespace tandem::apps {
namespace {

namespace fs = std::filesystem;
using testing::ProgramRun;
using testing::TempDir;

// Two epochs of 8 steps, a checkpoint every 3 steps: saves at steps 3, 6, 9 (epoch 2, batch 1),
// 12, 15 and at the end of each epoch.
std::vector<std::string> saving_run(const std::string& log, const std::string& checkpoint) {
  return quick_run(log, {"--epochs", "2", "--devices", "cpu:0", "--threads", "1", "--save",
                         checkpoint, "--save-every-steps", "3", "--resume", "auto"});
}

// The epoch and the batch in it that the checkpoint at `path` records; {-1, -1} while there is
// none (or while a save is replacing its sidecar).
std::pair<int64_t, int64_t> saved_position(const std::string& path) {
  try {
    const nn::Metadata meta = nn::load_safetensors(nn::sidecar_path(path)).metadata;
    const auto batches = meta.find("epoch_batches");
    return {std::stoll(meta.at("epoch")), batches == meta.end() ? 0 : std::stoll(batches->second)};
  } catch (const std::exception&) {
    return {-1, -1};
  }
}

// Starts train_cifar with `args`, waits until its checkpoint is one from the middle of the second
// epoch, and kills it with SIGKILL, as a crash would. Returns the position of the checkpoint it
// left (usually that one; a later one when the run went on before the kill landed).
std::pair<int64_t, int64_t> kill_in_the_second_epoch(std::vector<std::string> args,
                                                     const std::string& checkpoint,
                                                     const std::string& output) {
  const pid_t pid = start_train_cifar(std::move(args), output);
  if (pid < 0) {
    ADD_FAILURE() << "fork failed";
    return {-1, -1};
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto [epoch, batch] = saved_position(checkpoint);
    if (epoch == 1 && batch > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status)) << "the run ended before it was killed";
  return saved_position(checkpoint);
}

// Every tensor of the two checkpoints (weights, buffers, momentum), bit for bit.
void expect_same_tensors(const std::string& a, const std::string& b) {
  for (const auto& [x, y] :
       {std::pair{a, b}, std::pair{nn::sidecar_path(a), nn::sidecar_path(b)}}) {
    const nn::SafetensorsFile first = nn::load_safetensors(x), second = nn::load_safetensors(y);
    ASSERT_EQ(first.tensors.size(), second.tensors.size()) << x;
    for (size_t i = 0; i < first.tensors.size(); ++i) {
      const auto& [name, tensor] = first.tensors[i];
      ASSERT_EQ(name, second.tensors[i].first);
      const Tensor& other = second.tensors[i].second;
      if (tensor.dtype() == DType::Int64) {
        EXPECT_EQ(tensor.to_vector<int64_t>(), other.to_vector<int64_t>()) << name;
      } else {
        EXPECT_EQ(tensor.to_vector<float>(), other.to_vector<float>()) << name;
      }
    }
  }
}

class MidEpochResume : public ::testing::Test {
 protected:
  // The run that is never killed, and a run killed once in its second epoch.
  void SetUp() override {
    const ProgramRun whole = train_cifar(saving_run(dir_.file("whole.jsonl"), whole_ckpt()));
    ASSERT_EQ(whole.exit_code, 0) << whole.output;
    killed_at_ =
        kill_in_the_second_epoch(saving_run(log(), ckpt()), ckpt(), dir_.file("killed.txt"));
  }
  std::string whole_ckpt() const { return dir_.file("whole.ckpt"); }
  std::string ckpt() const { return dir_.file("run.ckpt"); }
  std::string log() const { return dir_.file("run.jsonl"); }

  TempDir dir_;
  std::pair<int64_t, int64_t> killed_at_;  ///< epoch and batch of the checkpoint the kill left
};

TEST_F(MidEpochResume, AKilledRunResumedEndsWithBitIdenticalWeights) {
  const ProgramRun resumed = train_cifar(saving_run(log(), ckpt()));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  expect_same_tensors(ckpt(), whole_ckpt());

  const auto log_records = read_log(log());
  const auto resumes = records_of(log_records, "resume");
  ASSERT_EQ(resumes.size(), 1u);
  // Usually where the kill left the checkpoint (epoch 2, batch 1); one save earlier when the
  // kill fell between the two renames of that save, and the checkpoint said so.
  const bool fell_back = resumed.output.find("was unusable") != std::string::npos;
  if (!fell_back) {
    EXPECT_EQ(resumes[0]["epoch"], killed_at_.first) << resumed.output;
    EXPECT_EQ(resumes[0]["batch"], killed_at_.second) << resumed.output;
  }
  EXPECT_NE(resumed.output.find("resuming "), std::string::npos) << resumed.output;
  // The second epoch's record is whole: its metrics carry the batches before the kill.
  const auto actual = epochs_of(log_records);
  ASSERT_EQ(actual.size(), 2u);
  expect_same_epochs(actual, epochs_of(read_log(dir_.file("whole.jsonl"))));
}

std::string save_id(const std::string& file) {
  return nn::load_safetensors(file).metadata.at("tandem.checkpoint_id");
}

// A kill between the two renames of a save leaves a new sidecar beside the old weights (Note
// [Checkpoint atomicity]): the restart takes the previous complete checkpoint, says so, and
// still ends where the uninterrupted run does. The kill above, right after a sidecar appeared,
// often lands there by itself; otherwise the test makes that state: the complete pair becomes
// the previous one (as the save's first step does) and another save's sidecar joins the weights.
TEST_F(MidEpochResume, AKillInsideASaveResumesFromThePreviousCheckpoint) {
  if (save_id(ckpt()) == save_id(nn::sidecar_path(ckpt()))) {
    for (const std::string& file : {ckpt(), nn::sidecar_path(ckpt())}) {
      const std::string kept =
          file == ckpt() ? nn::previous_path(ckpt()) : nn::sidecar_path(nn::previous_path(ckpt()));
      fs::remove(kept);  // it may be a hard link to `file`
      fs::copy_file(file, kept);
    }
    fs::copy_file(nn::sidecar_path(whole_ckpt()), nn::sidecar_path(ckpt()),
                  fs::copy_options::overwrite_existing);
  }
  const ProgramRun resumed = train_cifar(saving_run(log(), ckpt()));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("was unusable"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("one save earlier"), std::string::npos) << resumed.output;
  expect_same_tensors(ckpt(), whole_ckpt());
}

TEST(TrainCifar, ResumeAutoStartsAfreshWithoutACheckpointAndContinuesWithOne) {
  TempDir dir;
  const std::string log = dir.file("log.jsonl"), checkpoint = dir.file("run.ckpt");
  std::vector<std::string> args =
      quick_run(log, {"--epochs", "2", "--run-epochs", "1", "--save", checkpoint, "--resume",
                      "auto", "--devices", "cpu:0"});
  const ProgramRun first = train_cifar(args);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(first.output.find("resuming"), std::string::npos) << first.output;
  const ProgramRun second = train_cifar(args);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("resuming after epoch 1 (step 8)"), std::string::npos)
      << second.output;
  const auto records = read_log(log);
  ASSERT_EQ(records_of(records, "resume").size(), 1u);
  const auto epochs = epochs_of(records);
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_EQ(epochs[1]["epoch"], 2);
}

// Note [Resume auto never starts over]: a finished epoch saved with no earlier pair beside it,
// then damaged (truncated weights; a sidecar of another run): --resume auto refuses in one line
// naming the file and why, and leaves every file as it was; with --overwrite it is a
// contradiction; a sidecar alone (an interrupted first save) still starts afresh.
TEST(TrainCifar, ResumeAutoRefusesACheckpointItCannotLoadAndChangesNothing) {
  TempDir dir;
  const std::string log = dir.file("log.jsonl"), checkpoint = dir.file("run.ckpt");
  const std::string sidecar = nn::sidecar_path(checkpoint);
  const std::vector<std::string> first =
      quick_run(log, {"--epochs", "1", "--save", checkpoint, "--resume", "auto"});
  ASSERT_EQ(train_cifar(first).exit_code, 0);
  ASSERT_FALSE(fs::exists(nn::previous_path(checkpoint)));  // one save: no fallback
  std::vector<std::string> again = first;
  again.insert(again.end(), {"--epochs", "2"});

  fs::resize_file(checkpoint, fs::file_size(checkpoint) / 2);
  const std::string weights = contents(checkpoint), state = contents(sidecar),
                    logged = contents(log);
  expect_one_error_line(train_cifar(again), "--resume auto: the checkpoint at " + checkpoint +
                                                " cannot be loaded and there is no usable "
                                                "earlier one");
  EXPECT_EQ(contents(checkpoint), weights);
  EXPECT_EQ(contents(sidecar), state);
  EXPECT_EQ(contents(log), logged);
  EXPECT_FALSE(fs::exists(nn::previous_path(checkpoint)));

  // A whole pair of another run: each file loads, the two do not belong together.
  const std::string other = dir.file("other.ckpt");
  ASSERT_EQ(
      train_cifar(quick_run(dir.file("other.jsonl"), {"--epochs", "1", "--save", other})).exit_code,
      0);
  fs::copy_file(other, checkpoint, fs::copy_options::overwrite_existing);
  expect_one_error_line(train_cifar(again), "come from different saves");

  std::vector<std::string> contradiction = again;
  contradiction.push_back("--overwrite");
  expect_one_error_line(train_cifar(contradiction), "--resume excludes --overwrite");

  fs::remove(checkpoint);  // the sidecar alone: a first save that never finished
  const ProgramRun afresh = train_cifar(again);
  EXPECT_EQ(afresh.exit_code, 0) << afresh.output;
  EXPECT_EQ(afresh.output.find("resuming"), std::string::npos) << afresh.output;
}

// The checkpoint before the last of a finished run is a mid-epoch one (step 15: epoch 2,
// batch 7); resuming it with another seed would replay other batches (at an epoch boundary a
// new seed is only a warning: Note [A resume knows its run]).
TEST(TrainCifar, AMidEpochCheckpointResumesOnlyWithTheSameBatchLayout) {
  TempDir dir;
  const std::string checkpoint = dir.file("run.ckpt");
  const ProgramRun run = train_cifar(saving_run(dir.file("log.jsonl"), checkpoint));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(saved_position(nn::previous_path(checkpoint)), (std::pair<int64_t, int64_t>{1, 7}));
  expect_one_error_line(
      train_cifar({"--synthetic", "--subset", "256", "--batch-size", "32", "--lr", "0.05", "--seed",
                   "7", "--epochs", "2", "--resume", nn::previous_path(checkpoint), "--devices",
                   "cpu:0"}),
      "was saved in the middle of epoch 2 by a run with global batch 32 over 1 rank");
  expect_one_error_line(train_cifar({"--save-every-steps", "5"}),
                        "--save-every-steps needs --save PATH");
  expect_one_error_line(train_cifar({"--resume", "auto"}), "--resume auto resumes from --save's");
}

}  // namespace
}  // namespace tandem::apps
