#include "apps/train_cifar/progress.h"
#include "engine/elapsed.h"
#include "engine/error.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

namespace tandem::apps {
namespace {

constexpr int kBarWidth = 24;

}  // namespace

std::string format_duration(double seconds) {
  const auto total = static_cast<int64_t>(std::max(0.0, seconds));
  char text[32];
  if (total >= 3600) {
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", static_cast<long long>(total / 3600),
                  static_cast<long long>(total / 60 % 60), static_cast<long long>(total % 60));
  } else {
    std::snprintf(text, sizeof text, "%lld:%02lld", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  }
  return text;
}

double RunClock::elapsed() const {
  return seconds_since(start_);
}

double RunClock::left(double epoch_left, double epoch_total) const {
  const int later = std::max(0, epochs_ - done_ - 1);
  const double per_epoch = done_ > 0 ? done_seconds_ / done_ : epoch_total;
  return epoch_left + later * per_epoch;
}

double RunClock::left_between_epochs() const {
  return done_ > 0 ? std::max(0, epochs_ - done_) * done_seconds_ / done_ : 0.0;
}

void RunClock::epoch_done() {
  ++done_;
  done_seconds_ = elapsed();
}

std::optional<int> progress_terminal_columns() {
  if (isatty(STDOUT_FILENO) != 0) return terminal_columns();
  const char* given = std::getenv("TANDEM_TERMINAL_COLUMNS");
  const int columns = given != nullptr ? std::atoi(given) : 0;
  return columns > 0 ? std::optional<int>(columns) : std::nullopt;
}

int terminal_columns() {
  winsize size{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  const char* columns = std::getenv("COLUMNS");
  const int from_environment = columns != nullptr ? std::atoi(columns) : 0;
  return from_environment > 0 ? from_environment : 80;
}

namespace {

std::string joined(const std::vector<std::string>& fields) {
  std::string text;
  for (const std::string& field : fields) text += (text.empty() ? "" : " ") + field;
  return text;
}

}  // namespace

std::string fit_to_width(const std::vector<std::string>& fields, double done, int columns) {
  const std::string text = joined(fields);
  // One column stays free: a line that fills the last column wraps on some terminals.
  const int room = std::max(1, columns - 1);
  const int bar = std::min(kBarWidth, room - static_cast<int>(text.size()) - 3);  // "[" "] "
  if (bar < 4) {
    std::string fitting;
    for (const std::string& field : fields) {
      const std::string longer = fitting + (fitting.empty() ? "" : " ") + field;
      if (static_cast<int>(longer.size()) > room) break;
      fitting = longer;
    }
    // A first field wider than the terminal is still cut: something must show.
    return fitting.empty() ? text.substr(0, static_cast<size_t>(room)) : fitting;
  }
  const int filled = static_cast<int>(bar * std::clamp(done, 0.0, 1.0));
  return "[" + std::string(static_cast<size_t>(filled), '#') +
         std::string(static_cast<size_t>(bar - filled), '.') + "] " + text;
}

EpochProgress::EpochProgress(const EpochProgressOptions& options) : options_(options) {
  options_.steps = std::max<int64_t>(options_.steps, 1);
}

// Most telling first: a line cut to the terminal's width loses the speed (which the epoch's line
// repeats) before the time left.
std::string EpochProgress::line(const StepProgress& p) const {
  const double elapsed = seconds_since(start_);
  const int64_t steps = options_.steps, done_here = p.step - options_.first_step;
  const double per_step = done_here > 0 ? elapsed / static_cast<double>(done_here) : 0.0;
  const double epoch_left = per_step * static_cast<double>(steps - p.step);
  std::string run_left;
  if (options_.run != nullptr && options_.run->later_epochs()) {
    run_left =
        "(run " +
        format_duration(options_.run->left(epoch_left, per_step * static_cast<double>(steps))) +
        ")";
  }
  char loss[32], accuracy[32], speed[32];
  std::snprintf(loss, sizeof loss, "loss %.4f", p.loss);
  std::snprintf(accuracy, sizeof accuracy, "acc %.1f%%", 100.0 * p.accuracy);
  std::snprintf(speed, sizeof speed, "%.0f img/s", p.images_per_second);
  std::vector<std::string> fields{detail::concat("epoch ", options_.epoch, "/", options_.epochs),
                                  detail::concat(p.step, "/", steps), loss, accuracy,
                                  "eta " + format_duration(epoch_left)};
  if (!run_left.empty()) fields.push_back(run_left);
  fields.emplace_back(speed);
  if (!options_.bar_columns) return joined(fields);
  return fit_to_width(fields, static_cast<double>(p.step) / static_cast<double>(steps),
                      *options_.bar_columns);
}

void EpochProgress::update(const StepProgress& p) {
  if (p.step == last_printed_step_) return;
  const int64_t steps = options_.steps;
  if (options_.bar_columns) {
    // Redraw at most ten times a second: a terminal is slow next to a training step on a GPU.
    const auto now = std::chrono::steady_clock::now();
    if (p.step != steps && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    last_printed_step_ = p.step;
    std::fprintf(options_.out, "\r%s\033[K", line(p).c_str());
  } else {
    if (p.step < next_plain_step_ && p.step != steps) return;
    next_plain_step_ = p.step + std::max<int64_t>(1, steps / 10);
    last_printed_step_ = p.step;
    std::fprintf(options_.out, "%s\n", line(p).c_str());
  }
  std::fflush(options_.out);
}

void EpochProgress::finish() {
  if (options_.bar_columns) std::fprintf(options_.out, "\n");
  std::fflush(options_.out);
}

}  // namespace tandem::apps
