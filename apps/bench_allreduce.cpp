// bench_allreduce: all-reduce bandwidth of a process group (Gloo or MPI on host memory, or NCCL on
// each rank's GPU), on float32 buffers of the sizes DDP's buckets have. Run under the launcher:
//
//   tandem-run --nproc-per-node 2 -- bench_allreduce [--backend nccl]
//   mpirun -np 2 bench_allreduce --backend mpi
//
// Prints, on rank 0, the mean time per all-reduce and two bandwidths (as nccl-tests does):
// algorithm bandwidth = bytes / time, and bus bandwidth = algbw * 2(n-1)/n, the traffic each
// link carries in a ring all-reduce, comparable across rank counts.

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <string>

#include "apps/common/run_main.h"
#include "engine/elapsed.h"
#include "engine/tandem.h"
#include "parallel/comm/launch_env.h"
#include "parallel/comm/mpi_process_group.h"
#include "parallel/comm/process_group.h"

namespace {

using namespace tandem;
using namespace tandem::parallel;

struct Row {
  double mib = 0;
  int iterations = 0;
  double ms = 0;
};

// Times `iterations` all-reduces after `warmup` untimed ones; the barrier lines the ranks up so
// the clock measures the collective, not one rank arriving late.
Row measure(ProcessGroup& group, double mib, int warmup, int iterations) {
  const int64_t n = static_cast<int64_t>(mib * 1024 * 1024 / sizeof(float));
  Tensor buffer =
      full({n}, static_cast<double>(group.rank() + 1), {.device = group.tensor_device()});
  group.allreduce({buffer}, ReduceOp::Sum)->wait();
  // Sanity check before timing: the sum of (rank + 1) over the ranks, in every element.
  const double expected = group.size() * (group.size() + 1) / 2.0;
  const double got = buffer.slice(n - 1, n).item();
  TANDEM_CHECK(got == expected, "[bench_allreduce] wrong result ", got, ", expected ", expected);
  buffer.zero_();  // zeros stay zeros, however many sums follow
  // synchronize(), not wait(): under NCCL wait() only orders the caller's stream, and the clock
  // must stop when the collective has run (Note [Work wait and synchronize]).
  for (int i = 0; i < warmup; ++i) group.allreduce({buffer}, ReduceOp::Sum)->synchronize();
  group.barrier()->synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) group.allreduce({buffer}, ReduceOp::Sum)->synchronize();
  const double seconds = seconds_since(start);
  return Row{mib, iterations, seconds * 1000.0 / iterations};
}

int run(int argc, char** argv) {
  std::vector<double> sizes_mib = {1, 4, 25, 100};
  int warmup = 3;
  int iterations = 20;
  std::string backend = "gloo";
  bool check_consistency = true;
  CLI::App app{"All-reduce bandwidth of a process group (run under tandem-run)", "bench_allreduce"};
  app.add_option(
         "--backend", backend,
         "gloo (host memory), nccl (each rank's GPU) or mpi (host memory; run under mpirun)")
      ->check(CLI::IsMember({"gloo", "nccl", "mpi"}))
      ->capture_default_str();
  app.add_option("--sizes-mib", sizes_mib, "buffer sizes in MiB")->capture_default_str();
  app.add_option("--warmup", warmup, "untimed all-reduces per size")->capture_default_str();
  app.add_option("--iterations", iterations, "timed all-reduces per size")->capture_default_str();
  app.add_flag("!--no-consistency-check", check_consistency,
               "skip Gloo's and MPI's comparison of the ranks' calls before each all-reduce (Note "
               "[Collective consistency]), to see what it costs");
  CLI11_PARSE(app, argc, argv);
  const DistributedEnv env = backend == "mpi" ? mpi_environment() : from_environment();
  auto group = init_process_group(backend, env, {.check_consistency = check_consistency});
  std::vector<Row> rows;
  rows.reserve(sizes_mib.size());
  for (double mib : sizes_mib) rows.push_back(measure(*group, mib, warmup, iterations));
  if (group->rank() == 0) {
    const int n = group->size();
    std::printf("%s all-reduce, %d ranks, float32 on %s, %d iterations after %d warm-up%s\n",
                backend.c_str(), n, group->tensor_device().str().c_str(), iterations, warmup,
                check_consistency ? "" : ", no consistency check");
    std::printf("%10s %12s %14s %14s\n", "size MiB", "time ms", "algbw GB/s", "busbw GB/s");
    for (const Row& row : rows) {
      const double bytes = row.mib * 1024 * 1024;
      const double algbw = bytes / (row.ms / 1000.0) / 1e9;
      std::printf("%10g %12.3f %14.3f %14.3f\n", row.mib, row.ms, algbw, algbw * 2.0 * (n - 1) / n);
    }
  }
  group->barrier()->wait();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tandem::apps::run_main("bench_allreduce", [&] { return run(argc, argv); });
}
