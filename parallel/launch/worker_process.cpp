#include "parallel/launch/worker_process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "engine/error.h"

namespace tandem::parallel {
namespace {

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the launcher's own output is gone (closed terminal): drop, never die
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// Everything between fork() and exec() must be async-signal-safe (the launcher may have other
// threads, e.g. the store server), so it only uses system calls on data prepared beforehand.
[[noreturn]] void exec_child(char* const* argv, char* const* envp, int out, int err, int report,
                             pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl took effect
  ::setpgid(0, 0);
  ::dup2(out, STDOUT_FILENO);
  ::dup2(err, STDERR_FILENO);
  // Start from a clean signal state: the launcher's handlers and ignored signals (SIGPIPE, see
  // Note [SIGPIPE]) are its own business, not the worker's.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &default_action, nullptr);
  ::execve(argv[0], argv, envp);
  const int error = errno;
  [[maybe_unused]] const ssize_t ignored = ::write(report, &error, sizeof(error));
  ::_exit(127);
}

std::vector<char*> pointers(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

void LinePrefixer::feed(const char* data, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    pending_.push_back(data[i]);
    // A very long line without an end is written in pieces rather than held without bound.
    if (data[i] == '\n' || data[i] == '\r' || pending_.size() >= 65536) {
      emit(pending_);
      pending_.clear();
    }
  }
}

void LinePrefixer::flush() {
  if (pending_.empty()) return;
  pending_.push_back('\n');
  emit(pending_);
  pending_.clear();
}

void LinePrefixer::emit(std::string_view line) {
  // One write per line: lines of different workers interleave, their characters never do.
  std::string text = prefix_;
  text.append(line);
  write_all(fd_, text.data(), text.size());
}

WorkerProcess::WorkerProcess(const std::vector<std::string>& argv,
                             const std::vector<std::string>& environment) {
  TANDEM_CHECK(!argv.empty(), "[tandem-run] no command to run");
  int out[2], err[2], report[2];
  TANDEM_CHECK(::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(err, O_CLOEXEC) == 0 &&
                   ::pipe2(report, O_CLOEXEC) == 0,
               "[tandem-run] pipe failed: ", std::strerror(errno));
  stdout_ = net::Socket(out[0]);
  stderr_ = net::Socket(err[0]);
  net::Socket out_write(out[1]), err_write(err[1]), report_read(report[0]), report_write(report[1]);
  std::vector<char*> argv_pointers = pointers(argv);
  std::vector<char*> env_pointers = pointers(environment);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  TANDEM_CHECK(pid_ >= 0, "[tandem-run] fork failed: ", std::strerror(errno));
  if (pid_ == 0) {
    exec_child(argv_pointers.data(), env_pointers.data(), out[1], err[1], report[1], parent);
  }
  // Set the group here too, so signal() cannot race the child's own setpgid().
  ::setpgid(pid_, pid_);
  report_write.reset();
  int error = 0;
  ssize_t got;
  do {
    got = ::read(report_read.fd(), &error, sizeof(error));
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof(error))) {
    ::waitpid(pid_, &status_, 0);
    exited_ = true;
    TANDEM_FAIL("[tandem-run] cannot start ", argv[0], ": ", std::strerror(error));
  }
}

WorkerProcess::~WorkerProcess() {
  if (pid_ > 0 && !exited_) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status_, 0);
  }
}

void WorkerProcess::signal(int sig) {
  if (pid_ <= 0 || exited_) return;
  // The group reaches grandchildren (a shell's commands); the pid covers the instant before the
  // child has made its group.
  ::kill(-pid_, sig);
  ::kill(pid_, sig);
}

bool WorkerProcess::poll_exit() {
  if (exited_) return true;
  const pid_t done = ::waitpid(pid_, &status_, WNOHANG);
  if (done == pid_) exited_ = true;
  return exited_;
}

std::string find_executable(const std::string& program) {
  TANDEM_CHECK(!program.empty(), "[tandem-run] no command to run (put it after --)");
  auto runnable = [](const std::string& path) {
    struct stat info {};
    return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
           ::access(path.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    if (runnable(program)) return program;
    struct stat info {};
    const bool exists = ::stat(program.c_str(), &info) == 0;
    TANDEM_FAIL("[tandem-run] cannot run ", program, ": ",
                !exists                 ? "no such file"
                : S_ISDIR(info.st_mode) ? "it is a folder"
                : !S_ISREG(info.st_mode)
                    ? "not a regular file"
                    : "not executable (chmod +x, or name its interpreter first)");
  }
  const char* path = std::getenv("PATH");
  std::stringstream folders(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string folder;
  while (std::getline(folders, folder, ':')) {
    std::string candidate = (folder.empty() ? "." : folder) + "/" + program;
    if (runnable(candidate)) return candidate;
  }
  TANDEM_FAIL("[tandem-run] command not found: ", program, " (not on PATH)");
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")";
  }
  return "stopped with wait status " + std::to_string(status);
}

}  // namespace tandem::parallel
