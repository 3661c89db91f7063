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

TEST(Progress, TheBarShrinksThenTheTextIsCutToTheWidth) {
  const std::string text = "epoch 1/10  5/391  1234 img/s  loss 2.3026  acc  10.0%  eta 1:02";
  EXPECT_EQ(fit_to_width(text, 0.5, 200), "[############............] " + text);
  const std::string eighty = fit_to_width(text, 0.5, 80);
  EXPECT_EQ(eighty.size(), 79u);  // the last column stays free
  EXPECT_EQ(eighty.rfind("[", 0), 0u);
  EXPECT_EQ(fit_to_width(text, 0.5, 60), text.substr(0, 59));  // no room for a bar at all
}

TEST(Progress, PlainLinesPrintEachStepOnce) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  EpochProgress progress(1, 1, 8, /*bar=*/false, out, 80);
  for (int64_t step : {4, 8, 8}) progress.update({.step = step, .loss = 1, .accuracy = 0.5});
  progress.finish();
  std::rewind(out);
  std::string text;
  for (int c; (c = std::fgetc(out)) != EOF;) text += static_cast<char>(c);
  std::fclose(out);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;  // 4/8 and 8/8, once each
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

TEST(TrainCifarInATerminal, TheBarFitsEightyColumns) {
  testing::TempDir dir;
  std::vector<std::string> args = quick_run(dir.file("log.jsonl"), {"--epochs", "1"});
  args.erase(std::find(args.begin(), args.end(), "--no-progress"));
  const std::string output = output_in_a_terminal(args, 80);
  ASSERT_NE(output.find("epoch 1/1: train loss"), std::string::npos) << output;
  ASSERT_NE(output.find("] epoch 1/1"), std::string::npos) << "no bar: " << output;
  std::string piece;
  std::istringstream pieces(output);
  int redraws = 0;
  for (std::string line; std::getline(pieces, line, '\r');) {
    std::istringstream by_line(line);
    for (std::string part; std::getline(by_line, part, '\n');) {
      const size_t erase = part.find("\033[K");
      if (erase != std::string::npos) part.erase(erase);
      if (part.rfind("[", 0) != 0) continue;  // the header and the epoch lines print once
      ++redraws;
      EXPECT_LE(part.size(), 79u) << part;
    }
  }
  EXPECT_GE(redraws, 1);
}

}  // namespace
}  // namespace tandem::apps
