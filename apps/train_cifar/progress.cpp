#include "apps/train_cifar/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace tandem::apps {
namespace {

constexpr int kBarWidth = 24;

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

}  // namespace

bool stdout_is_terminal() {
  return isatty(STDOUT_FILENO) != 0;
}

int terminal_columns() {
  winsize size{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  const char* columns = std::getenv("COLUMNS");
  const int from_environment = columns != nullptr ? std::atoi(columns) : 0;
  return from_environment > 0 ? from_environment : 80;
}

std::string fit_to_width(const std::string& text, double done, int columns) {
  // One column stays free: a line that fills the last column wraps on some terminals.
  const int room = std::max(1, columns - 1);
  const int bar = std::min(kBarWidth, room - static_cast<int>(text.size()) - 3);  // "[" "] "
  if (bar < 4) return text.substr(0, static_cast<size_t>(room));
  const int filled = static_cast<int>(bar * std::clamp(done, 0.0, 1.0));
  return "[" + std::string(static_cast<size_t>(filled), '#') +
         std::string(static_cast<size_t>(bar - filled), '.') + "] " + text;
}

EpochProgress::EpochProgress(int epoch, int epochs, int64_t steps, bool bar, std::FILE* out,
                             int columns)
    : epoch_(epoch),
      epochs_(epochs),
      steps_(std::max<int64_t>(steps, 1)),
      bar_(bar),
      out_(out),
      columns_(columns) {}

std::string EpochProgress::line(const StepProgress& p) const {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta =
      p.step > 0 ? elapsed / static_cast<double>(p.step) * static_cast<double>(steps_ - p.step)
                 : 0.0;
  char text[256];
  std::snprintf(text, sizeof text,
                "epoch %d/%d  %lld/%lld  %.0f img/s  loss %.4f  acc %5.1f%%  eta %s", epoch_,
                epochs_, static_cast<long long>(p.step), static_cast<long long>(steps_),
                p.images_per_second, p.loss, 100.0 * p.accuracy, format_duration(eta).c_str());
  if (!bar_) return text;
  return fit_to_width(text, static_cast<double>(p.step) / static_cast<double>(steps_), columns_);
}

void EpochProgress::update(const StepProgress& p) {
  if (p.step == last_printed_step_) return;
  if (bar_) {
    // Redraw at most ten times a second: a terminal is slow next to a training step on a GPU.
    const auto now = std::chrono::steady_clock::now();
    if (p.step != steps_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    last_printed_step_ = p.step;
    std::fprintf(out_, "\r%s\033[K", line(p).c_str());
  } else {
    if (p.step < next_plain_step_ && p.step != steps_) return;
    next_plain_step_ = p.step + std::max<int64_t>(1, steps_ / 10);
    last_printed_step_ = p.step;
    std::fprintf(out_, "%s\n", line(p).c_str());
  }
  std::fflush(out_);
}

void EpochProgress::finish() {
  if (bar_) std::fprintf(out_, "\n");
  std::fflush(out_);
}

}  // namespace tandem::apps
