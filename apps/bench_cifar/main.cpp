// bench_cifar: images/s, scaling efficiency and communication of a ResNet training step in each
// mode (single, dp, ddp), device count and batch size; optionally a projection onto N GPUs. See
// docs/benchmarks.md and `bench_cifar --help`.
//
// Every configuration runs in fresh processes started through tandem-run's logic: this program
// again, with the hidden --worker-json flag (Note [One process per configuration]).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <thread>

#include "apps/bench_cifar/bench_options.h"
#include "apps/bench_cifar/projection_report.h"
#include "apps/bench_cifar/report.h"
#include "apps/bench_cifar/runner.h"
#include "apps/bench_cifar/worker.h"
#include "apps/common/busy_cores.h"
#include "apps/common/output_paths.h"
#include "apps/common/run_main.h"
#include "apps/common/step_profiler.h"
#include "apps/common/training_setup.h"
#include "engine/cpu_features.h"
#include "engine/error.h"

namespace {

using namespace tandem::apps::bench;

void print_progress(const BenchRow& row, const Progress& at) {
  const std::string result =
      row.measured ? std::to_string(std::lround(row.measured->images_per_s)) + " images/s"
                   : "failed";
  const std::string repeat = at.repeats > 1 ? " (repeat " + std::to_string(at.repeat + 1) + " of " +
                                                  std::to_string(at.repeats) + ")"
                                            : "";
  std::fprintf(stderr, "[%zu/%zu] %s%s: %s\n", at.run + 1, at.runs, row.config.label().c_str(),
               repeat.c_str(), result.c_str());
}

bool has_bf16_rows(const BenchOptions& options) {
  return std::find(options.precisions.begin(), options.precisions.end(),
                   tandem::nn::Precision::BFloat16) != options.precisions.end();
}

bool on_cpus(const BenchOptions& options) {
  return options.device_type == DeviceType::Cpu ||
         (options.device_type == DeviceType::Auto && !tandem::apps::gpus_by_default());
}

// Where bf16 trains slower than fp32 on this CPU (Note [Where bf16 pays]), train_cifar refuses it
// without --allow-slow-bf16; a benchmark asked for bf16 rows runs them anyway, so that the user
// sees by how much, after one line saying why. Emulated bf16 (no bfloat16 instructions) stays
// refused: it takes several times as long and shows nothing new.
void run_slow_bf16_rows_with_a_note(BenchOptions& options) {
  if (!has_bf16_rows(options) || !on_cpus(options) || options.setup.allow_slow_bf16) return;
  const tandem::Bf16Verdict verdict = tandem::cpu_bf16_verdict();
  if (verdict.speed != tandem::Bf16Speed::Slower) return;
  std::fprintf(stderr,
               "bench_cifar: note: bf16 is slower than fp32 on this CPU (%s); its rows show by how "
               "much, and train_cifar refuses it unless --allow-slow-bf16\n",
               verdict.reason.c_str());
  options.setup.allow_slow_bf16 = true;
}

// Note [bf16 on busy cores]: said before the rows, which show it.
void warn_of_bf16_on_busy_cores(const BenchOptions& options) {
  if (!has_bf16_rows(options) || !on_cpus(options)) return;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string warning = tandem::apps::bf16_on_busy_cores_warning(
      "bench_cifar", tandem::nn::Precision::BFloat16, total_threads(options),
      tandem::apps::read_load_average().value_or(0), cores);
  if (!warning.empty()) std::fprintf(stderr, "%s\n", warning.c_str());
}

// Note [Convolution peak]: measured once, before the matrix, with the rows' thread budget.
std::optional<ConvPeak> conv_peak(const BenchOptions& options) {
  if (!on_cpus(options)) return std::nullopt;
  std::fprintf(stderr, "measuring the convolution peak ...\n");
  return measure_conv_peak(total_threads(options), has_bf16_rows(options));
}

int run(int argc, char** argv) {
  BenchOptions options;
  if (!parse_bench_options(argc, argv, options)) return 0;
  if (!options.worker_json.empty()) return run_worker(options);
  validate(options);
  choose_data(options, tandem::parallel::process_environment());
  run_slow_bf16_rows_with_a_note(options);
  warn_of_bf16_on_busy_cores(options);
  // Before the (possibly long) measurements, not after them.
  if (!options.json.empty()) tandem::apps::check_output_path("bench_cifar", "--json", options.json);
  if (!options.profile_dir.empty()) {
    tandem::apps::prepare_profile_dir("bench_cifar", options.profile_dir);
  }
  RunInfo info = current_run_info(options);
  info.conv_peak = conv_peak(options);
  WorkArea area;
  std::vector<BenchRow> rows = run_matrix(options, area, print_progress);
  if (info.conv_peak) add_peak_fractions(rows, *info.conv_peak);
  print_table(stdout, options, info, rows);
  print_warnings(stderr, info, rows);
  std::optional<ProjectionReport> projection;
  if (options.project) {
    projection = build_projection(options, rows, area);
    print_projection(stdout, options, *projection);
  }
  if (!options.json.empty()) write_json(options.json, options, info, rows, projection);
  if (!options.profile_dir.empty()) {
    std::printf(
        "\nprofiles (per-op tables *.ops.md, Chrome traces *.trace.json for "
        "https://ui.perfetto.dev or chrome://tracing): %s\n",
        options.profile_dir.c_str());
  }
  for (const BenchRow& row : rows) {
    if (!row.measured) return 1;  // the table says which and why
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tandem::apps::run_main("bench_cifar", [&] { return run(argc, argv); });
}
