// bench_collectives: time and bandwidth of a process group's collectives (Gloo or MPI on host
// memory, NCCL on each rank's GPU) on float32 buffers from 4 KiB to 64 MiB, printed as
// nccl-tests prints them (Note [Bus bandwidth] in collective_case.cpp). Run under a launcher:
//
//   tandem-run --nproc-per-node 2 -- bench_collectives [--backend nccl]
//   mpirun -np 2 bench_collectives --backend mpi --collectives all_reduce,all_to_all --json
//   out.json
//
// scripts/compare_collectives.py runs it beside PyTorch's Gloo collectives
// (scripts/pytorch_collectives.py, which times them the same way).

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "apps/bench_collectives/byte_sizes.h"
#include "apps/bench_collectives/collective_case.h"
#include "apps/common/flag_errors.h"
#include "apps/common/output_paths.h"
#include "apps/common/parse_command_line.h"
#include "apps/common/run_main.h"
#include "engine/elapsed.h"
#include "engine/ops/factory.h"
#include "engine/tandem.h"
#include "parallel/comm/backends.h"
#include "parallel/comm/init_process_group.h"
#include "parallel/comm/process_group.h"
#include "parallel/comm/rendezvous/launch_env.h"

namespace {

using namespace tandem;
using namespace tandem::apps;
using namespace tandem::parallel;

struct Options {
  std::string backend = "gloo";          // a name of parallel::backends()
  std::vector<std::string> collectives;  // empty: all
  std::vector<std::string> sizes = {"4K", "64K", "1M", "16M", "64M"};
  int warmup = 5;
  int iterations = 20;
  bool check_consistency = true;
  std::string json;
};

struct Row {
  Collective collective;
  int64_t requested = 0;  // bytes asked for
  int64_t bytes = 0;      // nccl-tests' S, after rounding to whole elements per rank
  double seconds = 0;     // one collective, the slowest rank's mean
};

// The slowest rank's value: a collective has finished when its last rank has.
double max_over_ranks(ProcessGroup& group, double value) {
  Tensor cell = full({1}, value, {.dtype = DType::Float32, .device = group.tensor_device()});
  group.allreduce({cell}, ReduceOp::Max)->synchronize();
  return cell.item();
}

// `iterations` back-to-back collectives after `warmup` untimed ones, each waited for before the
// next starts (as DDP's buckets are, and as scripts/pytorch_collectives.py does); the barrier
// lines the ranks up so that the clock measures the collectives, not a rank arriving late.
// synchronize(), not wait(): under NCCL wait() only orders the caller's stream, and the clock must
// stop when the collective has run (Note [Work wait and synchronize]).
Row measure(ProcessGroup& group, Collective collective, int64_t bytes, const Options& o) {
  CollectiveCase buffers(group, collective, bytes);
  buffers.check();
  for (int i = 0; i < o.warmup; ++i) buffers.launch()->synchronize();
  group.barrier()->synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iterations; ++i) buffers.launch()->synchronize();
  const double mean = seconds_since(start) / o.iterations;
  return Row{collective, bytes, buffers.bytes(), max_over_ranks(group, mean)};
}

double algbw(const Row& row) {
  return static_cast<double>(row.bytes) / row.seconds / 1e9;
}

void print_table(const std::vector<Row>& rows, const ProcessGroup& group, const Options& o) {
  const int n = group.size();
  std::printf("%s collectives, %d ranks, float32 on %s, %d iterations after %d warm-up%s\n",
              o.backend.c_str(), n, group.tensor_device().str().c_str(), o.iterations, o.warmup,
              o.check_consistency ? "" : ", no consistency check");
  std::printf("%-22s %8s %10s %11s %11s %11s\n", "collective", "size", "bytes", "time us",
              "algbw GB/s", "busbw GB/s");
  for (const Row& row : rows) {
    std::printf("%-22s %8s %10lld %11.1f %11.3f %11.3f\n", collective_name(row.collective),
                byte_size_label(row.requested).c_str(), static_cast<long long>(row.bytes),
                row.seconds * 1e6, algbw(row), algbw(row) * bus_factor(row.collective, n));
  }
}

void write_json(const std::vector<Row>& rows, const ProcessGroup& group, const Options& o) {
  nlohmann::json out = {{"program", "bench_collectives"},
                        {"backend", o.backend},
                        {"world_size", group.size()},
                        {"device", group.tensor_device().str()},
                        {"dtype", "float32"},
                        {"warmup", o.warmup},
                        {"iterations", o.iterations},
                        {"check_consistency", o.check_consistency},
                        {"rows", nlohmann::json::array()}};
  for (const Row& row : rows) {
    const double factor = bus_factor(row.collective, group.size());
    out["rows"].push_back({{"collective", collective_name(row.collective)},
                           {"requested_bytes", row.requested},
                           {"bytes", row.bytes},
                           {"time_us", row.seconds * 1e6},
                           {"algbw_gbps", algbw(row)},
                           {"bus_factor", factor},
                           {"busbw_gbps", algbw(row) * factor}});
  }
  std::ofstream file(o.json);
  TANDEM_CHECK(file << out.dump(1) << "\n", "[bench_collectives] cannot write ", o.json);
}

bool parse(Options& o, int argc, char** argv) {
  CLI::App app{
      "Time and bandwidth of a process group's collectives (run under tandem-run or mpirun)",
      "bench_collectives"};
  std::vector<std::string> backend_names;
  for (const BackendInfo& backend : backends()) backend_names.emplace_back(backend.name);
  app.add_option("--backend", o.backend, backend_choices())
      ->check(CLI::IsMember(backend_names))
      ->capture_default_str();
  app.add_option("--collectives", o.collectives,
                 "comma-separated; default all: all_reduce, broadcast, reduce, all_gather, "
                 "all_gather_into_tensor, gather, scatter, reduce_scatter, all_to_all")
      ->delimiter(',');
  app.add_option(
         "--sizes", o.sizes,
         "nccl-tests' sizes S (Note [Bus bandwidth]), comma-separated: 4096, 4K, 64KiB, 16M")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed collectives per row")
      ->check(non_negative_number())
      ->capture_default_str();
  app.add_option("--iterations", o.iterations, "timed collectives per row")
      ->check(positive_count())
      ->capture_default_str();
  app.add_flag("!--no-consistency-check", o.check_consistency,
               "skip Gloo's and MPI's comparison of the ranks' calls before each collective (Note "
               "[Collective consistency]), to see what it costs");
  app.add_option("--json", o.json,
                 "also write the rows to this file (rank 0; checked before the benchmark starts)");
  return parse_command_line(app, argc, argv, "bench_collectives");
}

int run(int argc, char** argv) {
  Options o;
  if (!parse(o, argc, argv)) return 0;
  std::vector<Collective> collectives;
  for (const std::string& name : o.collectives) collectives.push_back(collective_from_name(name));
  if (collectives.empty()) collectives = all_collectives();
  std::vector<int64_t> sizes;
  for (const std::string& text : o.sizes) sizes.push_back(parse_byte_size(text));

  const DistributedEnv env = find_backend(o.backend).environment();
  // Before the rendezvous and the benchmark: a --json path that cannot be written is one line
  // now, not after minutes of measuring (rank 0 writes it; a launcher stops the other ranks).
  if (env.rank == 0 && !o.json.empty()) check_output_path("bench_collectives", "--json", o.json);
  auto group = init_process_group(o.backend, env, {.check_consistency = o.check_consistency});
  std::vector<Row> rows;
  for (const Collective collective : collectives) {
    for (const int64_t bytes : sizes) rows.push_back(measure(*group, collective, bytes, o));
  }
  if (group->rank() == 0) {
    print_table(rows, *group, o);
    if (!o.json.empty()) write_json(rows, *group, o);
  }
  group->barrier()->wait();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tandem::apps::run_main("bench_collectives", [&] { return run(argc, argv); });
}
