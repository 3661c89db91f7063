#pragma once
/// One attempt of tandem-run's workers on this node (launcher.h): starts them, relays their
/// output with a rank prefix, reaps them, and stops them all when one fails (or another node's
/// did, Note [Restart rounds]), when the launcher is interrupted, or when the job runs out of
/// time. launcher.cpp decides which attempts run; this file runs one.

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "parallel/launch/launch_options.h"
#include "parallel/launch/restart_rounds.h"
#include "parallel/launch/signal_forwarding.h"

namespace tandem::parallel {

/// Which nodes an attempt runs on (Note [Elastic rounds]): this one's place among them, densely
/// numbered, and how many; a fixed-size job's are --node-rank and --nnodes.
struct NodeShape {
  int group_rank = 0;
  int nodes = 1;
  int first_rank(const LaunchOptions& o) const { return group_rank * o.nproc_per_node; }
};

/// One attempt's place in the job: which attempt it is, and what a failure in it leads to.
struct Attempt {
  int number = 0;         ///< TORCHELASTIC_RESTART_COUNT, the same on every node
  int restarts_used = 0;  ///< by this launcher, before this attempt
  NodeShape shape{};      ///< the nodes it runs on
  std::optional<std::chrono::steady_clock::time_point>
      job_deadline{};               ///< --timeout counts over all attempts
  RestartRounds* rounds = nullptr;  ///< with --max-restarts > 0
};

/// How an attempt ended: the job's result so far, and whether every worker starts again.
struct AttemptOutcome {
  LaunchResult result;
  bool restart = false;  ///< a failure with --max-restarts left
};

/// Runs the workers of `attempt` on this node until they have all exited. `port` is the
/// rendezvous store's; interrupts arrive through `signals`.
AttemptOutcome supervise_attempt(const LaunchOptions& options, int port, const Attempt& attempt,
                                 SignalForwarding& signals);

/// Writes `text` and a newline to `fd` in one write() (the launcher's messages, between the
/// workers' relayed lines).
void write_line(int fd, const std::string& text);

/// Tells the other nodes' launchers something through the store; a store that is gone has
/// nobody left to tell (the next join() says so).
void tell_rounds(RestartRounds* rounds, const std::function<void(RestartRounds&)>& message);

}  // namespace tandem::parallel
