#include "apps/common/output_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/error.h"

namespace tandem::apps {
namespace {

// "host H, pid N", as the holder wrote it, or "" when it has not yet.
std::string holder_of(const std::string& lock_path) {
  std::ifstream in(lock_path);
  std::string host;
  std::string pid;
  in >> host >> pid;
  return pid.empty() ? "" : "host " + host + ", pid " + pid;
}

std::string this_process() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + " " + std::to_string(::getpid()) + "\n";
}

// Whether `fd` is still the file at `path`: a holder that ended removed the name after we opened
// it, and a lock on the removed file would guard nothing.
bool still_named(int fd, const std::string& path) {
  struct stat opened {};
  struct stat named {};
  return ::fstat(fd, &opened) == 0 && ::stat(path.c_str(), &named) == 0 &&
         opened.st_dev == named.st_dev && opened.st_ino == named.st_ino;
}

}  // namespace

std::string OutputLock::lock_path(const std::string& path) {
  return path + ".lock";
}

OutputLock::OutputLock(const std::string& program, const std::string& flag, const std::string& path)
    : lock_path_(lock_path(path)) {
  std::error_code error;
  const auto type = std::filesystem::status(path, error).type();
  // A device or a pipe (--log-json /dev/stdout) is nobody's file to replace: nothing to guard.
  if (type != std::filesystem::file_type::not_found &&
      type != std::filesystem::file_type::regular) {
    return;
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    // O_NOFOLLOW: a symlink planted at the lock's name must not have its target truncated and
    // overwritten with this run's name (review S8).
    const int fd = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    TANDEM_CHECK(fd >= 0, "[", program, "] ", flag, " ", path, ": cannot create its lock file ",
                 lock_path_, " (",
                 errno == ELOOP ? "it is a symbolic link; remove it" : std::strerror(errno), ")");
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int why = errno;
      ::close(fd);
      if (why != EWOULDBLOCK) return;  // no locks on this file system: unguarded, as before
      const std::string holder = holder_of(lock_path_);
      TANDEM_FAIL("[", program, "] ", flag, " ", path, " is being written by another run (",
                  holder.empty() ? "" : holder + "; ", lock_path_,
                  "): wait for it to end, or choose another path");
    }
    if (!still_named(fd, lock_path_)) {
      ::close(fd);
      continue;
    }
    const std::string me = this_process();
    // The holder's name is for the other run's message only; the lock holds without it.
    [[maybe_unused]] const bool named =
        ::ftruncate(fd, 0) == 0 && ::write(fd, me.data(), me.size()) > 0;
    fd_ = fd;
    return;
  }
  TANDEM_FAIL("[", program, "] ", flag, " ", path, ": its lock file ", lock_path_,
              " keeps being replaced; is another run starting and stopping on it?");
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  // Removed while still locked: a run that opened the name meanwhile sees it gone (still_named)
  // and opens a fresh one.
  ::unlink(lock_path_.c_str());
  ::close(fd_);
}

}  // namespace tandem::apps
