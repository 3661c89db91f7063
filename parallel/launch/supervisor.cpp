#include "parallel/launch/supervisor.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

#include "engine/error.h"
#include "parallel/comm/rendezvous/store.h"
#include "parallel/launch/worker_process.h"

extern char** environ;

namespace tandem::parallel {
namespace {

using Clock = std::chrono::steady_clock;

// Cheap (one check() request), and the other nodes' workers stop within about this of a failure.
constexpr std::chrono::milliseconds kRoundCheckInterval{500};

// The columns of the terminal `fd` writes to, or 0 when it is not a terminal.
int terminal_columns_of(int fd) {
  winsize size{};
  if (::isatty(fd) == 0 || ::ioctl(fd, TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col > 0 ? size.ws_col : 80;
}

std::vector<std::string> worker_environment(const LaunchOptions& o, int local_rank, int port,
                                            int attempt, NodeShape shape) {
  std::map<std::string, std::string> vars;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const size_t equals = text.find('=');
    if (equals != std::string::npos) vars[text.substr(0, equals)] = text.substr(equals + 1);
  }
  for (const auto& name : o.unset_env) vars.erase(name);
  if (vars.count("TANDEM_NUM_THREADS") == 0 && o.env.count("TANDEM_NUM_THREADS") == 0) {
    // N workers sharing the cores: oversubscribing them slows every worker down.
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    vars["TANDEM_NUM_THREADS"] = std::to_string(std::max(1, cores / o.nproc_per_node));
  }
  vars["RANK"] = std::to_string(shape.first_rank(o) + local_rank);
  vars["LOCAL_RANK"] = std::to_string(local_rank);
  vars["WORLD_SIZE"] = std::to_string(shape.nodes * o.nproc_per_node);
  vars["LOCAL_WORLD_SIZE"] = std::to_string(o.nproc_per_node);
  vars["GROUP_RANK"] = std::to_string(shape.group_rank);
  vars["MASTER_ADDR"] = o.master_addr;
  vars["MASTER_PORT"] = std::to_string(port);
  vars["TANDEM_STORE_HOSTED"] = o.host_store ? "1" : "0";
  // torchrun's name, so scripts that read it work under both launchers.
  vars["TORCHELASTIC_RESTART_COUNT"] = std::to_string(attempt);
  // Note [Progress through the launcher]: the workers write into pipes, but the user sees the
  // launcher's terminal; a bar redrawn with '\r' survives the rank prefix (LinePrefixer emits at
  // each '\r'), so a worker may draw one in the columns the prefix leaves.
  if (const int columns = terminal_columns_of(o.stdout_fd); columns > 0) {
    const int rank = shape.first_rank(o) + local_rank;
    const int prefix = static_cast<int>(("[rank " + std::to_string(rank) + "] ").size());
    vars["TANDEM_TERMINAL_COLUMNS"] = std::to_string(std::max(columns - prefix, 20));
  } else {
    vars.erase("TANDEM_TERMINAL_COLUMNS");  // an outer launcher's terminal is not this output
  }
  for (const auto& [name, value] : o.env) vars[name] = value;
  std::vector<std::string> out;
  out.reserve(vars.size());
  for (const auto& [name, value] : vars) out.push_back(name + "=" + value);
  return out;
}

// Watches the workers of one attempt: relays their output, reaps them, and stops them all when
// one fails (or another node's did), when the launcher is interrupted, or when the job runs out
// of time.
class Supervisor {
 public:
  Supervisor(const LaunchOptions& options, int port, const Attempt& attempt)
      : options_(options), attempt_(attempt), job_deadline_(attempt.job_deadline) {
    const std::string program = find_executable(options.command[0]);
    std::vector<std::string> argv = options.command;
    argv[0] = program;
    for (int local = 0; local < options.nproc_per_node; ++local) {
      const int rank = attempt.shape.first_rank(options) + local;
      const std::string prefix = "[rank " + std::to_string(rank) + "] ";
      workers_.push_back(std::make_unique<WorkerProcess>(
          argv, worker_environment(options, local, port, attempt.number, attempt.shape)));
      out_.emplace_back(prefix, options.stdout_fd);
      err_.emplace_back(prefix, options.stderr_fd);
      exits_.push_back(
          WorkerExit{.rank = rank, .local_rank = local, .pid = workers_.back()->pid()});
    }
  }

  LaunchResult run(SignalForwarding& signals) {
    while (!all_exited()) {
      relay_output(signals.fd(), std::chrono::milliseconds(50));
      for (int sig : signals.take()) on_interrupt(sig);
      reap();
      check_deadlines();
      watch_round();
    }
    // A stopped job leaves nothing behind: what the workers started (a shell's background
    // commands ignore SIGINT) goes with them. A process group's id is not reused while any
    // member lives, so this reaches only the workers' leftovers.
    if (stopping_) {
      for (auto& w : workers_) ::kill(-w->pid(), SIGKILL);
    }
    relay_output(-1, std::chrono::milliseconds(0));  // what the workers wrote before exiting
    for (auto& p : out_) p.flush();
    for (auto& p : err_) p.flush();
    if (!result_.message.empty()) write_line(options_.stderr_fd, result_.message);
    result_.workers = exits_;
    return result_;
  }

  /// Whether every worker is to start again after run() (--max-restarts).
  bool restarting() const { return restarting_; }

 private:
  bool all_exited() const {
    for (const auto& w : workers_) {
      if (!w->exited()) return false;
    }
    return true;
  }

  // Polls every open output pipe (and the signal pipe) once, relaying what is there. With a zero
  // wait it drains pipes until they are empty, then closes them: a worker's own children may
  // keep a pipe open forever, and the job is over once the workers are.
  void relay_output(int signal_fd, std::chrono::milliseconds wait) {
    while (true) {
      std::vector<pollfd> fds;
      std::vector<std::pair<net::Socket*, LinePrefixer*>> targets;
      for (size_t i = 0; i < workers_.size(); ++i) {
        for (auto [pipe, prefixer] : {std::pair{&workers_[i]->stdout_pipe(), &out_[i]},
                                      std::pair{&workers_[i]->stderr_pipe(), &err_[i]}}) {
          if (!pipe->valid()) continue;
          fds.push_back({pipe->fd(), POLLIN, 0});
          targets.emplace_back(pipe, prefixer);
        }
      }
      if (signal_fd >= 0) fds.push_back({signal_fd, POLLIN, 0});
      if (fds.empty()) return;
      const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
      if (ready <= 0) {
        if (wait.count() == 0) close_all_pipes();
        return;
      }
      for (size_t i = 0; i < targets.size(); ++i) {
        if (fds[i].revents == 0) continue;
        char buffer[16384];
        const ssize_t n = ::read(targets[i].first->fd(), buffer, sizeof(buffer));
        if (n > 0) targets[i].second->feed(buffer, static_cast<size_t>(n));
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) targets[i].first->reset();
      }
      if (wait.count() != 0) return;
    }
  }

  void close_all_pipes() {
    for (auto& w : workers_) {
      w->stdout_pipe().reset();
      w->stderr_pipe().reset();
    }
  }

  void reap() {
    for (size_t i = 0; i < workers_.size(); ++i) {
      WorkerProcess& w = *workers_[i];
      if (w.exited() || !w.poll_exit()) continue;
      const int status = w.wait_status();
      exits_[i].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      exits_[i].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      const bool failed = exits_[i].exit_code != 0;
      if (!failed || stopping_) continue;  // after a stop, the others' exits are our doing
      result_.exit_code = exits_[i].exit_code > 0 ? exits_[i].exit_code : 128 + exits_[i].signal;
      // 130 / 143: the rank stopped because it (or, through the ranks' stop agreement, another
      // rank) got SIGINT / SIGTERM; it did not fail, and may not be the rank that was signalled.
      const bool interrupted = exits_[i].exit_code == 130 || exits_[i].exit_code == 143;
      result_.message = "[tandem-run] rank " + std::to_string(exits_[i].rank) + " (local rank " +
                        std::to_string(exits_[i].local_rank) + ", pid " + std::to_string(w.pid()) +
                        ") " +
                        (interrupted ? "stopped after an interrupt (exit status " +
                                           std::to_string(exits_[i].exit_code) + ")"
                                     : describe_wait_status(status));
      if (options_.stop_on_failure) {
        result_.message += "; " + restart_or_give_up(true);
        stop_all(SIGTERM);
      } else {
        stopping_ = true;  // report the first failure only
      }
    }
  }

  // After a failure here (`failed_here`) or another node's: a restart while any is left, else
  // the end of the job, which the other nodes learn through the store. Returns the end of the
  // line that says so.
  std::string restart_or_give_up(bool failed_here) {
    const int max = options_.max_restarts;
    if (max == 0) return "stopping the other workers";
    if (attempt_.restarts_used < max) {
      restarting_ = true;
      if (failed_here) tell_rounds(attempt_.rounds, [](RestartRounds& r) { r.close(); });
      return "restarting all workers (restart " + std::to_string(attempt_.restarts_used + 1) +
             " of " + std::to_string(max) + ")";
    }
    std::string gave_up = "gave up after " + std::to_string(max) +
                          (max == 1 ? " restart" : " restarts") + " (--max-restarts " +
                          std::to_string(max) + ")";
    end_job(gave_up);
    return gave_up;
  }

  void end_job(const std::string& why) {
    restarting_ = false;
    const std::string reason = "node " + std::to_string(options_.node_rank) + " " + why;
    tell_rounds(attempt_.rounds, [&](RestartRounds& r) { r.end_job(reason); });
  }

  // Note [Restart rounds]: another node's failure closes the round. The workers here may be
  // blocked in a collective waiting for that node's, so they are stopped, not awaited.
  void watch_round() {
    if (attempt_.rounds == nullptr || stopping_ || Clock::now() < next_round_check_) return;
    next_round_check_ = Clock::now() + kRoundCheckInterval;
    bool closed = true;  // a lost store ends the attempt too; the next join() says why
    try {
      closed = attempt_.rounds->closed();
    } catch (const Error&) {
    }
    if (!closed) return;
    result_.exit_code = 1;
    result_.message = "[tandem-run] another node ended attempt " + std::to_string(attempt_.number) +
                      "; " + restart_or_give_up(false);
    stop_all(SIGTERM);
  }

  void on_interrupt(int sig) {
    write_line(options_.stderr_fd, std::string("[tandem-run] got ") + ::strsignal(sig) +
                                       "; forwarding it to the workers");
    if (!stopping_) {
      result_.exit_code = 128 + sig;
      result_.message = std::string("[tandem-run] interrupted by ") + ::strsignal(sig);
    }
    end_job(std::string("was interrupted by ") + ::strsignal(sig));
    stop_all(sig);
  }

  // Signals every running worker, then SIGKILL after the grace period.
  void stop_all(int sig) {
    stopping_ = true;
    for (auto& w : workers_) w->signal(sig);
    if (!kill_deadline_) kill_deadline_ = Clock::now() + options_.kill_grace;
  }

  void check_deadlines() {
    const auto now = Clock::now();
    if (job_deadline_ && now >= *job_deadline_ && !result_.timed_out) {
      result_.timed_out = true;
      if (!stopping_) {
        result_.exit_code = 124;
        result_.message = "[tandem-run] the job ran longer than its timeout of " +
                          net::format_duration(options_.timeout) + "; stopped the workers";
      }
      end_job("ran past its --timeout");
      stop_all(SIGTERM);
    }
    if (kill_deadline_ && now >= *kill_deadline_) {
      for (auto& w : workers_) w->signal(SIGKILL);
    }
  }

  const LaunchOptions& options_;
  const Attempt attempt_;
  std::vector<std::unique_ptr<WorkerProcess>> workers_;
  std::vector<LinePrefixer> out_, err_;
  std::vector<WorkerExit> exits_;
  LaunchResult result_;
  bool stopping_ = false;
  bool restarting_ = false;
  std::optional<Clock::time_point> kill_deadline_, job_deadline_;
  Clock::time_point next_round_check_ = Clock::now() + kRoundCheckInterval;
};

}  // namespace

AttemptOutcome supervise_attempt(const LaunchOptions& options, int port, const Attempt& attempt,
                                 SignalForwarding& signals) {
  Supervisor supervisor(options, port, attempt);
  LaunchResult result = supervisor.run(signals);
  return {std::move(result), supervisor.restarting()};
}

void write_line(int fd, const std::string& text) {
  const std::string line = text + "\n";
  [[maybe_unused]] const ssize_t ignored = ::write(fd, line.data(), line.size());
}

void tell_rounds(RestartRounds* rounds, const std::function<void(RestartRounds&)>& message) {
  if (rounds == nullptr) return;
  try {
    message(*rounds);
  } catch (const Error&) {
  }
}

}  // namespace tandem::parallel
