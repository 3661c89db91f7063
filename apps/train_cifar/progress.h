#pragma once
/// Progress of one epoch: a bar redrawn in place on a terminal, plain lines (about ten per epoch)
/// when the output is a file or a pipe, so logs stay readable.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tandem::apps {

struct StepProgress {
  int64_t step = 0;  ///< steps done this epoch
  double images_per_second = 0;
  double loss = 0;      ///< running mean over the epoch so far
  double accuracy = 0;  ///< running training accuracy, in [0, 1]
};

/// The width of the terminal on stdout (TIOCGWINSZ), else $COLUMNS, else 80.
int terminal_columns();

/// A bar line redrawn with '\r' must fit the terminal: a wrapped one leaves a stale line at
/// every redraw. The bar shrinks first (from 24 cells to none), then the text is cut.
std::string fit_to_width(const std::string& text, double done, int columns);

class EpochProgress {
 public:
  /// `bar`: redraw one line with '\r' (a terminal of `columns`); else print plain lines.
  EpochProgress(int epoch, int epochs, int64_t steps, bool bar, std::FILE* out = stdout,
                int columns = terminal_columns());
  void update(const StepProgress& progress);
  /// Ends the bar's line.
  void finish();

 private:
  std::string line(const StepProgress& progress) const;

  int epoch_;
  int epochs_;
  int64_t steps_;
  bool bar_;
  std::FILE* out_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_draw_{};
  int columns_;
  int64_t next_plain_step_ = 1;
  int64_t last_printed_step_ = -1;  ///< a step is printed once, however often it is reported
};

/// Whether stdout is a terminal (and so gets a progress bar).
bool stdout_is_terminal();

}  // namespace tandem::apps
