// The commands at the end of a run paste as they are (apps/train_cifar/next_steps.h).
#include "apps/train_cifar/next_steps.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "apps/common/wording.h"

namespace tandem::apps {
namespace {

TEST(NextSteps, ShellWordsQuoteOnlyWhatAShellWouldSplit) {
  EXPECT_EQ(shell_word("runs/run-1.ckpt"), "runs/run-1.ckpt");
  EXPECT_EQ(shell_word("my run.ckpt"), "'my run.ckpt'");
  EXPECT_EQ(shell_word("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_word("$HOME/*"), "'$HOME/*'");
  EXPECT_EQ(shell_word(""), "''");
}

TEST(NextSteps, EvaluateKeepsTheProgramPathAndTheRunsData) {
  TrainOptions options;
  options.command = {"./build/apps/train_cifar", "--save", "my run.ckpt"};
  options.save = "my run.ckpt";
  options.setup.arch = "resnet32";
  options.data_dir = "/data/my cifar";
  options.subset = 5000;
  const std::string program = (std::filesystem::current_path() / "build/apps/train_cifar").string();
  EXPECT_EQ(evaluate_command(options), program +
                                           " --arch resnet32 --eval-only --resume 'my run.ckpt' "
                                           "--data-dir '/data/my cifar' --subset 5000");
  options.verify_data = false;  // a data set of one's own stays unchecked
  EXPECT_EQ(evaluate_command(options), program +
                                           " --arch resnet32 --eval-only --resume 'my run.ckpt' "
                                           "--data-dir '/data/my cifar' --no-verify-data "
                                           "--subset 5000");
  options.synthetic = true;
  options.subset = 0;
  EXPECT_EQ(evaluate_command(options),
            program + " --arch resnet32 --eval-only --resume 'my run.ckpt' --synthetic");
  options.command = {"train_cifar"};  // found on PATH: as typed
  EXPECT_EQ(program_path(options), "train_cifar");
}

TEST(NextSteps, ContinueIsTheRunsCommandWithResume) {
  TrainOptions options;
  options.save = "run.ckpt";
  EXPECT_EQ(continue_command(options), "");  // no command line to repeat
  options.command = {"/opt/tandem/train_cifar",
                     "--epochs",
                     "30",
                     "--resume",
                     "old.ckpt",
                     "--overwrite",
                     "--save",
                     "run.ckpt",
                     "--log-json",
                     "a b.jsonl",
                     "--resume=x"};
  EXPECT_EQ(continue_command(options),
            "/opt/tandem/train_cifar --epochs 30 --save run.ckpt --log-json 'a b.jsonl' "
            "--resume run.ckpt");
}

}  // namespace
}  // namespace tandem::apps
