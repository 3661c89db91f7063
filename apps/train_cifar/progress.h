#pragma once
/// Progress of one epoch: a bar redrawn in place on a terminal, plain lines (about ten per epoch)
/// when the output is a file or a pipe, so logs stay readable; with the epoch's and the whole
/// run's time left.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

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
/// every redraw. The bar shrinks first (from 24 cells to none), then the last fields go whole
/// ("loss 2.3026", "1234 img/s": a field is never cut, so no number is left half shown).
/// `fields` are joined with one space.
std::string fit_to_width(const std::vector<std::string>& fields, double done, int columns);

/// The run's clock (this invocation's): its elapsed time, and the time left estimated from the
/// mean wall time of the epochs it finished (training, evaluation and checkpoint), or, before the
/// first one is finished, from the pace of the current epoch's training.
class RunClock {
 public:
  /// epochs: how many epochs this invocation will train (--run-epochs may end it early).
  explicit RunClock(int epochs = 1) : epochs_(epochs) {}
  void epoch_done();
  double elapsed() const;
  /// Seconds left in the run, when the current epoch needs `epoch_left` more of the
  /// `epoch_total` its training takes.
  double left(double epoch_left, double epoch_total) const;
  /// Seconds left after the epochs done so far (at their mean wall time).
  double left_between_epochs() const;
  /// Whether epochs follow the one in progress.
  bool later_epochs() const { return epochs_ - done_ > 1; }

 private:
  int epochs_;
  int done_ = 0;
  double done_seconds_ = 0;  ///< elapsed when the last epoch was done
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

struct EpochProgressOptions {
  int epoch = 1;  ///< counting from 1
  int epochs = 1;
  int64_t steps = 1;       ///< in the whole epoch
  int64_t first_step = 0;  ///< where a resumed epoch begins (its pace counts from there)
  /// Redraw one line with '\r' in a terminal of this many columns; plain lines (about ten per
  /// epoch) when empty, so logs stay readable.
  std::optional<int> bar_columns{};
  /// Adds the whole run's time left; none when null or in the run's last epoch.
  const RunClock* run = nullptr;
  std::FILE* out = stdout;
};

class EpochProgress {
 public:
  explicit EpochProgress(const EpochProgressOptions& options);
  void update(const StepProgress& progress);
  /// Ends the bar's line.
  void finish();

 private:
  std::string line(const StepProgress& progress) const;

  EpochProgressOptions options_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_draw_{};
  int64_t next_plain_step_ = 1;
  int64_t last_printed_step_ = -1;  ///< a step is printed once, however often it is reported
};

/// Where a progress bar can be drawn: the width of the terminal on stdout, or, in a worker of a
/// launcher whose own output is a terminal, the width the launcher gives it
/// (TANDEM_TERMINAL_COLUMNS: the terminal's less the rank prefix, Note [Progress through the
/// launcher]); nothing when the output is a file or a pipe.
std::optional<int> progress_terminal_columns();

/// "1:02" or "1:02:03".
std::string format_duration(double seconds);

}  // namespace tandem::apps
