// tandem-run: starts the workers of a distributed job on this machine, like torchrun.
//
//   tandem-run --nproc-per-node 2 -- ./train_cifar --mode ddp
//
// The logic lives in parallel/launch/launcher.h; this file only reads the flags.

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "apps/common/flag_errors.h"
#include "apps/common/parse_command_line.h"
#include "apps/common/run_main.h"
#include "apps/common/version.h"
#include "engine/error.h"
#include "parallel/launch/launcher.h"

namespace {

// --nnodes N (a fixed size) or MIN:MAX (torchrun's elastic spelling).
void parse_nnodes(const std::string& text, tandem::parallel::LaunchOptions& options) {
  const size_t colon = text.find(':');
  const auto number = [&](const std::string& part) {
    size_t used = 0;
    int value = -1;
    try {
      value = std::stoi(part, &used);
    } catch (const std::exception&) {
    }
    TANDEM_CHECK(!part.empty() && used == part.size() && value >= 1, "[tandem-run] --nnodes ", text,
                 ": expected N or MIN:MAX with 1 <= MIN <= MAX, e.g. --nnodes 2:4");
    return value;
  };
  options.nnodes = number(text.substr(colon == std::string::npos ? 0 : colon + 1));
  options.min_nodes = colon == std::string::npos ? 0 : number(text.substr(0, colon));
  TANDEM_CHECK(options.min_nodes <= options.nnodes, "[tandem-run] --nnodes ", text,
               ": MIN is above MAX");
}

// The flags as given; durations in seconds until launch_options() converts them.
struct LauncherFlags {
  tandem::parallel::LaunchOptions options;
  std::string nnodes = "1";
  double kill_grace_s = 30.0;
  double timeout_s = 0.0;
  double rdzv_timeout_s = 600.0;
  double last_call_s = 30.0;
};

void add_job_flags(CLI::App& app, LauncherFlags& flags) {
  auto& options = flags.options;
  app.add_option("--nproc-per-node,--nproc_per_node", options.nproc_per_node,
                 "workers to start on this machine")
      ->capture_default_str();
  app.add_option("--nnodes", flags.nnodes,
                 "machines in the job: N, or MIN:MAX (elastic: each attempt runs on the machines "
                 "that join its restart round, at least MIN; needs --max-restarts)")
      ->capture_default_str();
  app.add_option("--node-rank,--node_rank", options.node_rank, "this machine, 0..nnodes-1")
      ->capture_default_str();
  app.add_option("--master-addr,--master_addr", options.master_addr,
                 "address of node 0, where the rendezvous store runs")
      ->capture_default_str();
  app.add_option("--master-port,--master_port", options.master_port,
                 "port of the rendezvous store; 0 picks a free one (one node only)")
      ->capture_default_str();
}

void add_stop_and_restart_flags(CLI::App& app, LauncherFlags& flags) {
  app.add_option("--kill-grace", flags.kill_grace_s,
                 "seconds between SIGTERM and SIGKILL when stopping workers")
      ->check(tandem::apps::non_negative_number())
      ->capture_default_str();
  app.add_option("--timeout", flags.timeout_s, "stop the job after this many seconds (0: never)")
      ->check(tandem::apps::non_negative_number())
      ->capture_default_str();
  app.add_option("--max-restarts,--max_restarts", flags.options.max_restarts,
                 "restart every worker on every node this many times after a failure")
      ->capture_default_str();
  app.add_option("--rdzv-timeout,--rdzv_timeout", flags.rdzv_timeout_s,
                 "with --max-restarts: seconds to wait for the other nodes to join an attempt")
      ->check(tandem::apps::positive_number())
      ->capture_default_str();
  app.add_option("--rdzv-last-call,--rdzv_last_call", flags.last_call_s,
                 "with --nnodes MIN:MAX: seconds an attempt waits for more nodes once MIN have "
                 "joined")
      ->check(tandem::apps::non_negative_number())
      ->capture_default_str();
}

// Everything after the launcher's flags: the workers' program and its arguments.
std::vector<std::string> worker_command(CLI::App& app) {
  std::vector<std::string> command = app.remaining();
  // A flag after the launcher's own (a torchrun spelling, a typo) would be run as the program.
  if (!command.empty() && command.front().rfind("--", 0) == 0 && command.front() != "--") {
    TANDEM_FAIL("[tandem-run] ", tandem::apps::unexpected_arguments_message(app, {command.front()}),
                "; the program to run goes after -- (see --help)");
  }
  if (!command.empty() && command.front() == "--") command.erase(command.begin());
  return command;
}

std::chrono::milliseconds milliseconds_of(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

tandem::parallel::LaunchOptions launch_options(LauncherFlags flags) {
  parse_nnodes(flags.nnodes, flags.options);
  flags.options.rdzv_last_call = milliseconds_of(flags.last_call_s);
  flags.options.kill_grace = milliseconds_of(flags.kill_grace_s);
  flags.options.timeout = milliseconds_of(flags.timeout_s);
  flags.options.rdzv_timeout = milliseconds_of(flags.rdzv_timeout_s);
  return flags.options;
}

int run(int argc, char** argv) {
  LauncherFlags flags;
  CLI::App app{"tandem-run: start the workers of a distributed job on this machine (like torchrun)",
               "tandem-run"};
  add_job_flags(app, flags);
  add_stop_and_restart_flags(app, flags);
  // Everything from "--" (or the first argument that is not a flag) on is the workers' command.
  app.prefix_command();
  app.footer("Usage: tandem-run [flags] -- PROGRAM [ARGS...]\n");
  if (!tandem::apps::parse_command_line(app, argc, argv, "tandem-run")) return 0;
  flags.options.command = worker_command(app);
  return tandem::parallel::launch(launch_options(flags)).exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  return tandem::apps::run_main("tandem-run", [&] { return run(argc, argv); });
}
