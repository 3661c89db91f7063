#include "apps/train_cifar/metrics_log.h"

#include <filesystem>

#include "apps/common/output_paths.h"
#include "engine/error.h"

namespace tandem::apps {

namespace {

namespace fs = std::filesystem;

// Note [Logs are outputs too]: the metrics log is a file that a resumed run appends to and
// scripts/plot_training.py reads, so --log-json names a regular file (or a link to one). A FIFO
// would block the run at its first record until something reads it (and Ctrl-C with it), a
// pipe (a shell's >(...)) or a terminal (/dev/stdout) would mix or lose records across a
// resume: each is refused, naming what it is. And a log holding records is another run's
// unless this run resumes it (appends) or --overwrite says so, as --save's checkpoint is
// (Note [New run, old checkpoint]).
std::string not_a_file(const std::string& path) {
  std::error_code error;
  const fs::file_status own = fs::symlink_status(path, error);
  if (error || own.type() == fs::file_type::not_found) return "";
  if (own.type() == fs::file_type::fifo)
    return "a FIFO (named pipe), which blocks a run until read";
  const fs::file_status target = fs::status(path, error);
  if (error || target.type() == fs::file_type::regular) return "";
  switch (target.type()) {
    case fs::file_type::fifo:
      return "a pipe (a shell's >(...) or |), which a resume cannot append to";
    case fs::file_type::character: return "a character device (a terminal, /dev/stdout, /dev/null)";
    case fs::file_type::directory: return "";  // check_output_path() names a folder
    default: return "not a regular file (a device or socket)";
  }
}

void check_log_path(const std::string& path) {
  const std::string kind = not_a_file(path);
  TANDEM_CHECK(kind.empty(), "[train_cifar] --log-json ", path, " is ", kind,
               ": name a file (to follow a run: tail -f FILE)");
  check_output_path("train_cifar", "--log-json", path);
}

void check_log_is_ours(const std::string& path, LogOpening opening) {
  TANDEM_CHECK(opening != LogOpening::Create || existing_file_bytes(path) == 0,
               "[train_cifar] --log-json ", path,
               " holds the log of an earlier run, which this run would replace: name another "
               "file, add --overwrite to replace it, or --resume to continue that run");
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path, LogOpening opening)
    : path_(path), opening_(opening) {
  if (path.empty()) return;
  check_log_path(path);
  // Locked before its records are looked at, so that a run still writing it is named as such.
  lock_ = std::make_unique<OutputLock>("train_cifar", "--log-json", path);
  check_log_is_ours(path, opening);
}

void MetricsLog::write(const nlohmann::json& record) {
  if (path_.empty()) return;
  if (!out_.is_open()) {
    out_.open(path_, opening_ == LogOpening::Append ? std::ios::app : std::ios::trunc);
    TANDEM_CHECK(out_.good(), "[train_cifar] cannot write the metrics log ", path_);
  }
  out_ << record.dump() << '\n';
  out_.flush();
  TANDEM_CHECK(out_.good(), "[train_cifar] writing the metrics log ", path_, " failed");
}

}  // namespace tandem::apps
