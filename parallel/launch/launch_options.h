#pragma once
/// What one launcher is asked to do (LaunchOptions) and what came of it (LaunchResult, one
/// WorkerExit per worker): the launcher (launcher.h) and one attempt's supervisor
/// (supervisor.h) both read them, so they live apart from either.

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace tandem::parallel {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;  ///< machines in the job; with min_nodes, the most an attempt takes
  /// --nnodes MIN:MAX: the fewest machines an attempt starts with (0: nnodes, a fixed size).
  int min_nodes = 0;
  int node_rank = 0;  ///< this machine's id, 0 … nnodes - 1 (its group rank varies when elastic)
  /// Host of the rendezvous store: node 0's address as the other nodes reach it.
  std::string master_addr = "127.0.0.1";
  /// Port of the rendezvous store; 0 picks a free one (one node only: the other nodes could not
  /// know it).
  int master_port = 29500;
  /// Node 0 hosts the rendezvous store in the launcher (Note [Who hosts the store]); false
  /// leaves it to rank 0.
  bool host_store = true;
  /// The job's secret for the store's handshake (Note [Store handshake]), passed to the workers
  /// as TANDEM_JOB_TOKEN. Empty: TANDEM_JOB_TOKEN from the launcher's environment, else, for one
  /// node, a new one made by launch() (nobody else needs to know it); several nodes without one
  /// run with a store that anyone who reaches it can join, as the store says once.
  std::string job_token{};
  /// The program and its arguments; a name without '/' is looked up on PATH.
  std::vector<std::string> command{};
  /// Extra variables for every worker (after the launcher's own).
  std::map<std::string, std::string> env{};
  /// Variables of the launcher's environment that the workers must not inherit.
  std::vector<std::string> unset_env{};
  /// Whether one worker's failure stops the others (SIGTERM, then SIGKILL after kill_grace).
  bool stop_on_failure = true;
  /// Long enough for train_cifar's ranks to reach their next host sync (every 10 steps) and stop
  /// together after a Ctrl-C, keeping their checkpoint, on slow CPU steps too.
  std::chrono::milliseconds kill_grace{30000};
  /// Stops the job when it runs longer than this, over all attempts; 0: no limit.
  std::chrono::milliseconds timeout{0};
  /// How many times a failed worker restarts every worker of the job (torchrun's
  /// --max-restarts); 0: the first failure ends the job, and no launcher talks to the store.
  /// More needs host_store and stop_on_failure.
  int max_restarts = 0;
  /// With max_restarts > 0: how long a launcher waits for the other nodes to join an attempt
  /// (and node 0's for them to finish), before it gives up with an error naming the missing.
  std::chrono::milliseconds rdzv_timeout{600000};
  /// Elastic (min_nodes < nnodes): once min_nodes have joined a round, how long it waits for
  /// more before it starts (torchrun's last call).
  std::chrono::milliseconds rdzv_last_call{30000};
  /// Where the workers' prefixed output and the launcher's messages go.
  int stdout_fd = 1;
  int stderr_fd = 2;
};

struct WorkerExit {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  int exit_code = -1;  ///< its status, or -1 when a signal ended it
  int signal = 0;      ///< the signal that ended it, or 0
};

struct LaunchResult {
  /// 0 when every worker succeeded; else the first failed worker's status (128 + signal when a
  /// signal ended it), 128 + signal when the launcher was interrupted, 124 on timeout.
  int exit_code = 0;
  std::vector<WorkerExit> workers;  ///< by local rank
  /// Why the job failed (also written to stderr_fd), e.g. "[tandem-run] rank 1 (local rank 1,
  /// pid 123) exited with status 3; stopped the other workers"; empty on success.
  std::string message;
  bool timed_out = false;
  /// How many times the workers were restarted (max_restarts).
  int restarts = 0;
};

}  // namespace tandem::parallel
