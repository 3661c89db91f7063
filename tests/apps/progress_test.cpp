// The progress display: a bar that fits the terminal (a wrapped line leaves a stale copy at every
// redraw), and each step printed once.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "apps/train_cifar/progress.h"
#include "tests/apps/train_cifar_runs.h"
#include "tests/support/temp_dir.h"

namespace tandem::apps {
namespace {

TEST(Progress, TheBarShrinksThenWholeFieldsGo) {
  const std::vector<std::string> fields{"epoch 1/10", "5/391",       "loss 2.3026", "acc 10.0%",
                                        "eta 1:02",   "(run 12:03)", "1234 img/s"};
  const std::string text = "epoch 1/10 5/391 loss 2.3026 acc 10.0% eta 1:02 (run 12:03) 1234 img/s";
  EXPECT_EQ(fit_to_width(fields, 0.5, 200), "[############............] " + text);
  const std::string eighty = fit_to_width(fields, 0.5, 80);
  EXPECT_EQ(eighty.size(), 79u);  // the last column stays free
  EXPECT_EQ(eighty.rfind("[", 0), 0u);
  // No room for a bar at all: the speed goes whole, never cut mid-number (70 columns).
  EXPECT_EQ(fit_to_width(fields, 0.5, 70),
            "epoch 1/10 5/391 loss 2.3026 acc 10.0% eta 1:02 (run 12:03)");
  EXPECT_EQ(fit_to_width(fields, 0.5, 59), "epoch 1/10 5/391 loss 2.3026 acc 10.0% eta 1:02");
  EXPECT_EQ(fit_to_width({"a-first-field-wider-than-the-terminal"}, 0.5, 11),
            "a-first-f"
            "i");
}

std::string text_of(std::FILE* file) {
  std::rewind(file);
  std::string text;
  for (int c; (c = std::fgetc(file)) != EOF;) text += static_cast<char>(c);
  std::fclose(file);
  return text;
}

TEST(Progress, PlainLinesPrintEachStepOnce) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  EpochProgress progress({.steps = 8, .out = out});
  for (int64_t step : {4, 8, 8}) progress.update({.step = step, .loss = 1, .accuracy = 0.5});
  progress.finish();
  const std::string text = text_of(out);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;  // 4/8 and 8/8, once each
}

// The whole run's time left: the epochs after this one at the pace of this one until an epoch
// is done, then at the mean of the done ones; none in the last epoch.
TEST(Progress, TheRunsTimeLeftCountsTheEpochsStillToCome) {
  RunClock clock(3);
  EXPECT_TRUE(clock.later_epochs());
  EXPECT_DOUBLE_EQ(clock.left(/*epoch_left=*/5, /*epoch_total=*/10), 5 + 2 * 10);
  EXPECT_DOUBLE_EQ(clock.left_between_epochs(), 0);  // nothing measured yet
  clock.epoch_done();
  clock.epoch_done();
  EXPECT_FALSE(clock.later_epochs());
  EXPECT_DOUBLE_EQ(clock.left(5, 10), 5);
  EXPECT_NEAR(clock.left_between_epochs(), clock.elapsed() / 2, 0.01);

  RunClock one(1);
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  EpochProgress last({.steps = 4, .run = &one, .out = out});
  last.update({.step = 4});
  EXPECT_EQ(text_of(out).find("(run "), std::string::npos);
  RunClock two(2);
  out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  EpochProgress first({.epochs = 2, .steps = 4, .run = &two, .out = out});
  first.update({.step = 4});
  EXPECT_NE(text_of(out).find("eta 0:00 (run 0:0"), std::string::npos);
}

// train_cifar in a pseudo-terminal of 80 columns, as a user's terminal: every redraw of the bar
// (each piece between carriage returns and newlines) fits in 79 columns.
std::string output_in_a_terminal(const std::vector<std::string>& args, int columns) {
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) return "";
  const winsize size{.ws_row = 24, .ws_col = static_cast<unsigned short>(columns)};
  const std::string slave_name = ::ptsname(master);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    const int slave = ::open(slave_name.c_str(), O_RDWR);
    ::ioctl(slave, TIOCSWINSZ, &size);
    ::dup2(slave, STDOUT_FILENO);
    ::dup2(slave, STDERR_FILENO);
    std::vector<std::string> argv_strings = args;
    argv_strings.insert(argv_strings.begin(), testing::kTrainCifarProgram);
    std::vector<char*> argv;
    for (std::string& arg : argv_strings) argv.push_back(arg.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  std::string output;
  char buffer[4096];
  for (ssize_t n; (n = ::read(master, buffer, sizeof buffer)) > 0;) output.append(buffer, n);
  ::close(master);  // read() fails with EIO once the child has closed the terminal
  int status = 0;
  ::waitpid(pid, &status, 0);
  return output;
}

// Every redraw of the bar's line in `output` (each piece between carriage returns and newlines,
// with the rank prefix "[rank 0] " where a launcher adds one) fits in 79 columns; returns their
// count.
int bar_redraws_within_79_columns(const std::string& output) {
  int redraws = 0;
  std::istringstream pieces(output);
  for (std::string line; std::getline(pieces, line, '\r');) {
    std::istringstream by_line(line);
    for (std::string part; std::getline(by_line, part, '\n');) {
      const size_t erase = part.find("\033[K");  // ends every redraw of the bar's line
      if (erase == std::string::npos) continue;  // the header and the epoch lines print once
      part.erase(erase);
      ++redraws;
      EXPECT_LE(part.size(), 79u) << part;
    }
  }
  return redraws;
}

TEST(TrainCifarInATerminal, TheBarFitsEightyColumns) {
  testing::TempDir dir;
  std::vector<std::string> args = quick_run(dir.file("log.jsonl"), {"--epochs", "1"});
  args.erase(std::find(args.begin(), args.end(), "--no-progress"));
  const std::string output = output_in_a_terminal(args, 80);
  ASSERT_NE(output.find("epoch 1/1: train loss"), std::string::npos) << output;
  ASSERT_NE(output.find("] epoch 1/1"), std::string::npos) << "no bar: " << output;
  EXPECT_GE(bar_redraws_within_79_columns(output), 1);
}

// In ddp the ranks write into the launcher's pipes, but the user sees the launcher's terminal:
// rank 0 draws the bar there, in the columns its "[rank 0] " prefix leaves.
TEST(TrainCifarInATerminalMultiprocess, TheBarShowsInDdpWithinTheRankPrefix) {
  testing::TempDir dir;
  std::vector<std::string> args = quick_run(
      dir.file("log.jsonl"),
      {"--epochs", "2", "--mode", "ddp", "--backend", "gloo", "--nproc", "2", "--threads", "1"});
  args.erase(std::find(args.begin(), args.end(), "--no-progress"));
  const std::string output = output_in_a_terminal(args, 80);
  ASSERT_NE(output.find("[rank 0] epoch 2/2: train loss"), std::string::npos) << output;
  ASSERT_NE(output.find("[rank 0] ["), std::string::npos) << "no bar: " << output;
  EXPECT_NE(output.find("(run "), std::string::npos) << "no time left for the run: " << output;
  EXPECT_GE(bar_redraws_within_79_columns(output), 2);
  EXPECT_EQ(output.find("[rank 1] ["), std::string::npos) << output;  // rank 0's bar only
}

}  // namespace
}  // namespace tandem::apps
