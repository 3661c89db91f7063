// tandem-run: starts the workers of a distributed job on this machine, like torchrun.
//
//   tandem-run --nproc-per-node 2 -- ./train_cifar --mode ddp
//
// The logic lives in parallel/comm/launcher.h; this file only reads the flags.

#include <CLI/CLI.hpp>

#include <string>

#include "apps/common/flag_errors.h"
#include "apps/common/parse_command_line.h"
#include "apps/common/run_main.h"
#include "apps/common/version.h"
#include "engine/error.h"
#include "parallel/comm/launcher.h"

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

int run(int argc, char** argv) {
  tandem::parallel::LaunchOptions options;
  double kill_grace_s = 30.0;
  double timeout_s = 0.0;
  double rdzv_timeout_s = 600.0;
  CLI::App app{"tandem-run: start the workers of a distributed job on this machine (like torchrun)",
               "tandem-run"};
  app.add_option("--nproc-per-node,--nproc_per_node", options.nproc_per_node,
                 "workers to start on this machine")
      ->capture_default_str();
  std::string nnodes = "1";
  app.add_option("--nnodes", nnodes,
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
  app.add_option("--kill-grace", kill_grace_s,
                 "seconds between SIGTERM and SIGKILL when stopping workers")
      ->check(tandem::apps::non_negative_number())
      ->capture_default_str();
  app.add_option("--timeout", timeout_s, "stop the job after this many seconds (0: never)")
      ->check(tandem::apps::non_negative_number())
      ->capture_default_str();
  app.add_option("--max-restarts,--max_restarts", options.max_restarts,
                 "restart every worker on every node this many times after a failure")
      ->capture_default_str();
  app.add_option("--rdzv-timeout,--rdzv_timeout", rdzv_timeout_s,
                 "with --max-restarts: seconds to wait for the other nodes to join an attempt")
      ->check(tandem::apps::positive_number())
      ->capture_default_str();
  double last_call_s = 30.0;
  app.add_option("--rdzv-last-call,--rdzv_last_call", last_call_s,
                 "with --nnodes MIN:MAX: seconds an attempt waits for more nodes once MIN have "
                 "joined")
      ->check(tandem::apps::non_negative_number())
      ->capture_default_str();
  // Everything from "--" (or the first argument that is not a flag) on is the workers' command.
  app.prefix_command();
  app.footer("Usage: tandem-run [flags] -- PROGRAM [ARGS...]\n");
  if (!tandem::apps::parse_command_line(app, argc, argv, "tandem-run")) return 0;
  options.command = app.remaining();
  // A flag after the launcher's own (a torchrun spelling, a typo) would be run as the program.
  if (!options.command.empty() && options.command.front().rfind("--", 0) == 0 &&
      options.command.front() != "--") {
    TANDEM_FAIL("[tandem-run] ",
                tandem::apps::unexpected_arguments_message(app, {options.command.front()}),
                "; the program to run goes after -- (see --help)");
  }
  if (!options.command.empty() && options.command.front() == "--") {
    options.command.erase(options.command.begin());
  }
  parse_nnodes(nnodes, options);
  options.rdzv_last_call = std::chrono::milliseconds(static_cast<int64_t>(last_call_s * 1000));
  options.kill_grace = std::chrono::milliseconds(static_cast<int64_t>(kill_grace_s * 1000));
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  options.rdzv_timeout = std::chrono::milliseconds(static_cast<int64_t>(rdzv_timeout_s * 1000));
  return tandem::parallel::launch(options).exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  return tandem::apps::run_main("tandem-run", [&] { return run(argc, argv); });
}
