#include "parallel/launch/launcher.h"

#include <csignal>
#include <cstring>
#include <memory>
#include <optional>

#include "engine/error.h"
#include "parallel/comm/rendezvous/store.h"
#include "parallel/comm/rendezvous/store_auth.h"
#include "parallel/comm/rendezvous/store_server.h"
#include "parallel/launch/restart_rounds.h"
#include "parallel/launch/signal_forwarding.h"
#include "parallel/launch/supervisor.h"

namespace tandem::parallel {
namespace {

using Clock = std::chrono::steady_clock;

void validate(const LaunchOptions& o) {
  TANDEM_CHECK(o.nproc_per_node >= 1, "[tandem-run] --nproc-per-node must be at least 1, got ",
               o.nproc_per_node);
  TANDEM_CHECK(o.nnodes >= 1, "[tandem-run] --nnodes must be at least 1, got ", o.nnodes);
  const bool elastic = o.min_nodes != 0 && o.min_nodes != o.nnodes;
  TANDEM_CHECK(o.min_nodes >= 0 && o.min_nodes <= o.nnodes, "[tandem-run] --nnodes ", o.min_nodes,
               ":", o.nnodes, " needs 1 <= MIN <= MAX");
  TANDEM_CHECK(!elastic || o.max_restarts > 0, "[tandem-run] --nnodes ", o.min_nodes, ":", o.nnodes,
               " decides the nodes of each attempt at its restart round, which needs "
               "--max-restarts 1 or more");
  TANDEM_CHECK(o.node_rank >= 0 && o.node_rank < o.nnodes, "[tandem-run] --node-rank ", o.node_rank,
               " is out of range for --nnodes ", o.nnodes, " (0..", o.nnodes - 1, ")");
  TANDEM_CHECK(o.master_port >= 0 && o.master_port <= 65535, "[tandem-run] --master-port ",
               o.master_port, " is out of range 0..65535");
  TANDEM_CHECK(o.master_port != 0 || o.nnodes == 1,
               "[tandem-run] --master-port 0 (a free port) only works with one node: the other "
               "nodes could not know which port node 0 picked; give a fixed port");
  TANDEM_CHECK(!o.master_addr.empty(), "[tandem-run] --master-addr is empty");
  TANDEM_CHECK(!o.command.empty(),
               "[tandem-run] no command to run; put it after --, e.g. "
               "tandem-run --nproc-per-node 2 -- ./train_cifar");
  TANDEM_CHECK(o.max_restarts >= 0, "[tandem-run] --max-restarts must be at least 0, got ",
               o.max_restarts);
  if (o.max_restarts == 0) return;
  // The launchers agree on each attempt through the store they host (Note [Restart rounds]).
  TANDEM_CHECK(o.host_store,
               "[tandem-run] --max-restarts needs the launcher-hosted store: rank 0's store dies "
               "with the attempt, and the launchers agree on the next one through it");
  TANDEM_CHECK(o.stop_on_failure,
               "[tandem-run] --max-restarts restarts every worker after a failure, so it needs "
               "stop_on_failure");
  TANDEM_CHECK(o.rdzv_timeout.count() > 0, "[tandem-run] --rdzv-timeout must be positive");
}

// Settles the store port before any worker starts, so a busy port is one clear error up front.
// Returns the port, and the server when this launcher hosts it.
int prepare_port(const LaunchOptions& o, std::unique_ptr<StoreServer>& server) {
  if (o.node_rank != 0) return o.master_port;
  try {
    // Loopback for one machine's job with the default --master-addr (Note [Store address]).
    const std::string host = net::listen_host_for(o.master_addr);
    if (o.host_store) {
      server = std::make_unique<StoreServer>(
          StoreServerOptions{.host = host, .port = o.master_port, .token = o.job_token});
      return server->port();
    }
    // Rank 0 will host it: check (or pick) the port by binding it once. Another program could
    // take it before rank 0 binds it again; rank 0 then fails with the same clear message.
    const net::Socket probe = net::listen_on("[tandem-run]", host, o.master_port);
    return net::local_port(probe);
  } catch (const Error& e) {
    TANDEM_FAIL("[tandem-run] cannot use --master-port ", o.master_port,
                " for the rendezvous store: ", e.message());
  }
}

// Where node 0's own launcher reaches the store it hosts.
std::string local_store_host(const LaunchOptions& o) {
  const std::string host = net::listen_host_for(o.master_addr);
  return host.empty() ? "127.0.0.1" : host;
}

// A job that ended while its launcher waited for the other nodes: one line, as run() ends.
LaunchResult ended_between_attempts(const LaunchOptions& o, int exit_code, std::string message,
                                    int restarts) {
  write_line(o.stderr_fd, message);
  return LaunchResult{.exit_code = exit_code,
                      .workers = {},
                      .message = std::move(message),
                      .timed_out = exit_code == 124,
                      .restarts = restarts};
}

// Note [Elastic rounds]: which nodes an elastic attempt runs on, for the log of each node.
void say_members(const LaunchOptions& o, const Attempt& attempt) {
  std::string ids;
  for (int id : attempt.rounds->members()) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
  write_line(o.stderr_fd, "[tandem-run] attempt " + std::to_string(attempt.number) + " runs on " +
                              std::to_string(attempt.shape.nodes) + " of " +
                              std::to_string(o.nnodes) + " nodes (" + ids +
                              "): " + std::to_string(attempt.shape.nodes * o.nproc_per_node) +
                              " workers, node " + std::to_string(o.node_rank) + " is group rank " +
                              std::to_string(attempt.shape.group_rank));
}

// Joins each attempt with the other nodes and runs it, until one is not restarted.
LaunchResult run_attempts(const LaunchOptions& o, int port, Attempt attempt,
                          SignalForwarding& signals) {
  while (true) {
    int interrupt = 0;
    const auto cancelled = [&] {
      for (int sig : signals.take()) interrupt = sig;
      return interrupt != 0 || (attempt.job_deadline && Clock::now() >= *attempt.job_deadline);
    };
    std::optional<int> number;
    try {
      number = attempt.rounds->join(cancelled);
    } catch (const Error& e) {
      return ended_between_attempts(o, 1, e.message(), attempt.restarts_used);
    }
    if (!number) {
      const std::string why = interrupt != 0
                                  ? std::string("interrupted by ") + ::strsignal(interrupt)
                                  : "out of time (--timeout)";
      tell_rounds(attempt.rounds, [&](RestartRounds& r) {
        r.end_job("node " + std::to_string(o.node_rank) + " was " + why);
      });
      return ended_between_attempts(o, interrupt != 0 ? 128 + interrupt : 124,
                                    "[tandem-run] " + why + " while waiting for the other nodes",
                                    attempt.restarts_used);
    }
    attempt.number = *number;
    attempt.shape = {.group_rank = attempt.rounds->group_rank(),
                     .nodes = static_cast<int>(attempt.rounds->members().size())};
    if (o.min_nodes != 0 && o.min_nodes != o.nnodes) say_members(o, attempt);
    auto [result, restart] = supervise_attempt(o, port, attempt, signals);
    result.restarts = attempt.restarts_used;
    if (!restart) {
      if (result.exit_code != 0) return result;
      // Note [Node claims]: node 0 names a peer launcher that was lost instead of exiting 0.
      if (auto lost = attempt.rounds->finish()) {
        write_line(o.stderr_fd, *lost);
        result.exit_code = 1;
        result.message = std::move(*lost);
      }
      return result;
    }
    ++attempt.restarts_used;
  }
}

}  // namespace

// The job's secret (Note [Store handshake]): given, inherited, or made here for one node.
LaunchOptions with_job_token(LaunchOptions o) {
  if (o.job_token.empty()) o.job_token = auth::token_from_environment();
  if (o.job_token.empty() && o.nnodes == 1) o.job_token = auth::new_job_token();
  if (!o.job_token.empty()) o.env[auth::kTokenVariable] = o.job_token;
  return o;
}

LaunchResult launch(const LaunchOptions& given) {
  validate(given);
  const LaunchOptions options = with_job_token(given);
  std::unique_ptr<StoreServer> server;
  const int port = prepare_port(options, server);
  Attempt first{.shape = {.group_rank = options.node_rank, .nodes = options.nnodes}};
  if (options.timeout.count() > 0) first.job_deadline = Clock::now() + options.timeout;
  if (options.max_restarts == 0) {
    SignalForwarding signals;
    return supervise_attempt(options, port, first, signals).result;
  }
  // Every launcher, node 0's included, is a client of node 0's store (Note [Restart rounds]).
  // Connecting waits up to the rendezvous timeout for node 0's launcher to start.
  auto store = std::make_shared<TcpStore>(TcpStoreOptions{
      .host = options.node_rank == 0 ? local_store_host(options) : options.master_addr,
      .port = port,
      .token = options.job_token,
      .timeout = options.rdzv_timeout,
      .named_by = "--master-addr:--master-port"});
  RestartRounds rounds(store, {.nnodes = options.nnodes,
                               .min_nodes = options.min_nodes,
                               .node_rank = options.node_rank,
                               .last_call = options.rdzv_last_call,
                               .rdzv_timeout = options.rdzv_timeout,
                               .store_name = "the rendezvous store at " + store->address()});
  first.rounds = &rounds;
  SignalForwarding signals;
  return run_attempts(options, port, first, signals);
}

}  // namespace tandem::parallel
