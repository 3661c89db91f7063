#pragma once
/// One worker process of the launcher (tandem-run, spawn_ranks): started with its own
/// environment, its stdout and stderr coming back through pipes, and killed and reaped by RAII.

#include <sys/types.h>

#include <string>
#include <vector>

#include "parallel/comm/socket.h"

namespace tandem::parallel {

/// Writes what a worker prints to `fd`, each line prefixed (e.g. "[rank 1] "). A line ends at
/// '\n' or '\r' (progress bars redraw with '\r'), so lines of different workers never mix.
class LinePrefixer {
 public:
  LinePrefixer(std::string prefix, int fd) : prefix_(std::move(prefix)), fd_(fd) {}
  void feed(const char* data, size_t size);
  /// Writes an unterminated last line, with a newline.
  void flush();

 private:
  void emit(std::string_view line);

  std::string prefix_;
  int fd_;
  std::string pending_;  // the current line so far
};

class WorkerProcess {
 public:
  /// Starts `argv` (argv[0] is a path, see find_executable) with exactly `environment`
  /// ("NAME=value" entries). The worker leads its own process group, so signal() reaches what it
  /// started too, and it gets SIGKILL if the launcher dies. Throws "[tandem-run] cannot start
  /// ..." when the program cannot be executed.
  WorkerProcess(const std::vector<std::string>& argv, const std::vector<std::string>& environment);
  /// Kills a worker that is still running and reaps it. Never throws.
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  pid_t pid() const { return pid_; }
  /// Read ends of the worker's stdout and stderr; invalid once closed.
  net::Socket& stdout_pipe() { return stdout_; }
  net::Socket& stderr_pipe() { return stderr_; }

  /// Sends `sig` to the worker's process group (no-op once it has exited).
  void signal(int sig);
  /// Reaps the worker if it has exited; true once it has. Never blocks.
  bool poll_exit();
  bool exited() const { return exited_; }
  /// The waitpid() status, valid once exited().
  int wait_status() const { return status_; }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
  net::Socket stdout_, stderr_;
};

/// The path of `program`: itself when it contains a '/', else the first match on PATH.
/// Throws "[tandem-run] command not found: ..." when there is none.
std::string find_executable(const std::string& program);

/// "exited with status 3" or "was killed by signal 9 (Killed)".
std::string describe_wait_status(int status);

}  // namespace tandem::parallel
