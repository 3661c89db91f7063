#include "apps/bench_cifar/bench_options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "apps/common/choice_flag.h"
#include "apps/common/data_dir.h"
#include "apps/common/flag_errors.h"
#include "apps/common/flags.h"
#include "apps/common/parse_command_line.h"
#include "engine/error.h"
#include "engine/threads.h"

namespace tandem::apps::bench {
namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

// The matrix's axes: modes, device counts and kinds, batch sizes.
void add_shape_flags(CLI::App& app, BenchOptions& o) {
  add_modes_flag(app, o.modes);
  app.add_option("--devices", o.devices,
                 "device counts: dp runs on that many devices (cuda:0 … cuda:n-1 or cpu:0 … "
                 "cpu:n-1), ddp on that many processes (nccl or gloo)")
      ->delimiter(',')
      ->check(positive_count())  // "must be > 0, got 0" rather than CLI11's range
      ->check(CLI::Range(1, 1024))
      ->default_str("1,2");
  add_choice_flag(app, "--device-type", o.device_type, kDeviceTypeSpellings,
                  "where every mode runs: cuda (GPUs; ddp over nccl), cpu (CPU devices; ddp over "
                  "gloo) or auto (cuda where CUDA can run, else cpu)");
  add_backend_flag(app, o.backend,
                   "ddp's process group: " + parallel::backend_choices() +
                       " (bench_cifar starts the ranks with mpirun); default: nccl on cuda, gloo "
                       "on cpu");
  app.add_option("--batch-sizes", o.batch_sizes,
                 "global batch sizes, split over the devices or processes")
      ->delimiter(',')
      ->check(positive_count())
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->default_str("128");
}

// How each configuration is measured: model, steps, repeats, threads.
void add_timing_flags(CLI::App& app, BenchOptions& o) {
  add_arch_flag(app, o.setup.arch);
  app.add_option("--warmup", o.warmup,
                 "untimed steps before the timed ones (the first steps allocate, and DDP rebuilds "
                 "its buckets at step 2)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_option("--steps", o.steps,
                 "timed training steps (forward, cross-entropy, backward, SGD) per configuration")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_flag("--phase-sync", o.phase_sync,
               "wait for the devices after the forward, backward and optimizer phases of every "
               "timed step, so the phase times are the host's (on GPUs this stops the host from "
               "queueing ahead and slows the step); by default the phases are timed with device "
               "events and the devices are waited for only around the timed steps");
  app.add_option("--repeats", o.repeats,
                 "measure each configuration this many times, in rounds over the whole matrix, "
                 "and report the median images/s with its min-max: 3 is the fewest whose median "
                 "one disturbed run cannot move (1: one run, no spread)")
      ->check(positive_count())
      ->capture_default_str();
  add_threads_flag(app, o.threads,
                   "the budget of each row: dp splits it over its replicas, ddp gives each of n "
                   "processes threads/n");
}

// What else varies per row: formats, precisions, DDP's buckets, overlap and compression, dp's
// replicas.
void add_variant_flags(CLI::App& app, BenchOptions& o) {
  add_memory_format_flag(app, o.setup.memory_format);
  add_precision_flags(app, o.precisions, o.setup.allow_slow_bf16);
  add_bucket_flags(app, o.setup.ddp.reducer);
  add_choice_flag(
      app, "--overlap", o.overlaps, overlap_rows_spellings(),
      "ddp: all-reduce while backward runs (on), only after it (off), or a row for each (both)");
  add_grad_compression_flag(app, o.compressions);
  add_zero_flag(app, o.shardings);
  add_choices_flag(app, "--dp-replicas", o.dp_replicas, kReplicasSpellings,
                   "dp: replicas kept between steps and refreshed in place (persistent) or rebuilt "
                   "every step as PyTorch does (rebuilt), a row for each listed");
}

// The data and the outputs.
void add_input_output_flags(CLI::App& app, BenchOptions& o) {
  app.add_flag("--real", o.real, "real CIFAR-10 images from --data-dir instead of synthetic ones");
  add_data_dir_flag(app, o.data_dir);
  add_no_verify_data_flag(app, o.verify_data);
  app.add_option("--seed", o.setup.seed, "seed of the weights and the synthetic images")
      ->check(non_negative_number())
      ->capture_default_str();
  app.add_option("--json", o.json, "also write the rows (and the projection) to this JSON file");
  app.add_option("--profile", o.profile_dir,
                 "after each configuration's timed steps (first repeat), profile --steps more and "
                 "write a per-op table and a Chrome trace (Perfetto, chrome://tracing) per "
                 "process to this folder: CONFIG.rank<R>.ops.md and .trace.json");
  app.add_option("--worker-json", o.worker_json)->group("");  // internal: see BenchOptions
}

void add_matrix_flags(CLI::App& app, BenchOptions& o) {
  add_shape_flags(app, o);
  add_timing_flags(app, o);
  add_variant_flags(app, o);
  add_input_output_flags(app, o);
}

void add_projection_flags(CLI::App& app, BenchOptions& o) {
  app.add_flag("--project", o.project,
               "after the table, project DDP and DataParallel onto --project-gpus GPUs from one "
               "measured device and a model of the link");
  app.add_option("--project-gpus", o.project_gpus, "GPU counts to project onto")
      ->delimiter(',')
      ->check(CLI::Range(2, 4096))
      ->default_str("2,4,8");
  add_choice_flag(app, "--link", o.link, kLinkSpellings,
                  "interconnect of the projection: nvlink, pcie or both");
  app.add_option(
         "--nvlink-gbps", o.nvlink_gbps,
         "NVLink all-reduce bus bandwidth, GB/s per direction (conservative: nccl-tests reports a "
         "few hundred on A100/H100 NVLink for large messages; see docs/benchmarks.md)")
      ->check(positive_number())
      ->capture_default_str();
  app.add_option("--pcie-gbps", o.pcie_gbps,
                 "PCIe all-reduce bus bandwidth, GB/s per direction (about what PCIe 3.0 x16 "
                 "achieves, or 4.0 through the CPU)")
      ->check(positive_number())
      ->capture_default_str();
  app.add_option("--latency-us", o.latency_us,
                 "fixed cost of each collective or transfer, µs (NCCL's small-message all-reduce "
                 "time within a node)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
}

}  // namespace

const std::vector<Spelling<std::vector<Overlap>>>& overlap_rows_spellings() {
  static const std::vector<Spelling<std::vector<Overlap>>> spellings{
      {"on", {Overlap::On}}, {"off", {Overlap::Off}}, {"both", {Overlap::On, Overlap::Off}}};
  return spellings;
}

std::string BenchConfig::label() const {
  std::string text = mode_name(mode);
  text += " x" + std::to_string(devices) + " b" + std::to_string(batch);
  if (overlap) text += std::string(" overlap ") + overlap_name(*overlap);
  if (compression && *compression != parallel::GradCompression::None)
    text += std::string(" ") + parallel::grad_compression_name(*compression);
  if (sharding && *sharding != parallel::Sharding::None)
    text += std::string(" zero ") + zero_stage_name(*sharding);
  if (dp_replicas == Replicas::Rebuilt) text += " rebuilt replicas";
  if (precision != nn::Precision::Float32)
    text += std::string(" amp ") + nn::precision_name(precision);
  return text;
}

bool parse_bench_options(int argc, const char* const* argv, BenchOptions& options) {
  CLI::App app(
      "bench_cifar: images/s, scaling and communication of a ResNet training step on CIFAR-shaped "
      "data, in each mode, device count and batch size",
      "bench_cifar");
  app.footer(
      "On shared or busy cores (other jobs, builds, a CI runner, a laptop) a measurement can be "
      "off by several times, and a speed-up or efficiency built on it even more. The header "
      "gives the load average; with --repeats the table shows each configuration's median and "
      "min-max, and a warning names the rows whose runs disagreed by more than 10 %. Trust "
      "numbers from an idle machine. See docs/benchmarks.md.");
  add_matrix_flags(app, options);
  add_projection_flags(app, options);
  return parse_command_line(app, argc, argv, "bench_cifar");
}

void validate(const BenchOptions& o) {
  TANDEM_CHECK(!o.modes.empty() && !o.devices.empty() && !o.batch_sizes.empty() &&
                   !o.compressions.empty() && !o.dp_replicas.empty() && !o.precisions.empty(),
               "[bench_cifar] --modes, --devices, --batch-sizes, --grad-compression, "
               "--dp-replicas and --precision each need at least one value");
  TANDEM_CHECK(!o.project || !o.project_gpus.empty(), "[bench_cifar] --project-gpus is empty");
}

void choose_data(BenchOptions& o, const parallel::EnvLookup& environment) {
  if (!o.real) return;
  const DataDirChoice data =
      choose_data_dir("bench_cifar", o.data_dir,
                      "pass --data-dir DIR, or drop --real for synthetic data", environment);
  if (!data.notice.empty()) std::fprintf(stderr, "%s\n", data.notice.c_str());
  o.data_dir = data.dir;
}

std::vector<BenchConfig> expand_matrix(const BenchOptions& o) {
  std::vector<BenchConfig> configs;
  for (int64_t batch : o.batch_sizes) {
    for (Mode mode : o.modes) {
      if (mode == Mode::Single) {
        configs.push_back({.mode = mode, .devices = 1, .batch = batch});
        continue;
      }
      for (int devices : o.devices) {
        if (mode == Mode::DataParallel) {
          for (Replicas replicas : o.dp_replicas) {
            configs.push_back(
                {.mode = mode, .devices = devices, .batch = batch, .dp_replicas = replicas});
          }
          continue;
        }
        for (Overlap overlap : o.overlaps) {
          for (parallel::GradCompression compression : o.compressions) {
            for (parallel::Sharding sharding : o.shardings) {
              configs.push_back({.mode = mode,
                                 .devices = devices,
                                 .batch = batch,
                                 .overlap = overlap,
                                 .compression = compression,
                                 .sharding = sharding});
            }
          }
        }
      }
    }
  }
  // A mode listed twice, or a repeated count, would only measure the same thing again. Each
  // configuration's precisions run one after the other, so that their rows compare at the
  // closest moments of a noisy machine.
  std::vector<BenchConfig> unique;
  for (const BenchConfig& config : configs) {
    for (nn::Precision precision : o.precisions) {
      BenchConfig in_precision = config;
      in_precision.precision = precision;
      if (std::find(unique.begin(), unique.end(), in_precision) == unique.end()) {
        unique.push_back(in_precision);
      }
    }
  }
  return unique;
}

std::string config_problem(const BenchConfig& c) {
  if (c.batch < c.devices) {
    return "[bench_cifar] batch " + std::to_string(c.batch) + " is smaller than the " +
           std::to_string(c.devices) + (c.mode == Mode::Distributed ? " processes" : " devices") +
           " it is split over";
  }
  if (c.mode == Mode::Distributed && c.batch % c.devices != 0) {
    return "[bench_cifar] batch " + std::to_string(c.batch) + " does not split evenly over " +
           std::to_string(c.devices) + " processes";
  }
  return "";
}

std::vector<std::string> worker_arguments(const BenchOptions& o, const BenchConfig& c,
                                          const std::string& result_path) {
  const std::pair<const char*, std::string> flags[] = {
      {"--worker-json", result_path},
      {"--modes", mode_name(c.mode)},
      {"--devices", std::to_string(c.devices)},
      {"--device-type", name_in(kDeviceTypeSpellings, o.device_type)},
      {"--batch-sizes", std::to_string(c.batch)},
      {"--arch", o.setup.arch},
      {"--warmup", std::to_string(o.warmup)},
      {"--steps", std::to_string(o.steps)},
      {"--bucket-cap-mb", number(o.setup.ddp.reducer.bucket_cap_mb)},
      {"--first-bucket-mb", number(o.setup.ddp.reducer.first_bucket_mb)},
      {"--overlap", overlap_name(c.overlap.value_or(Overlap::On))},
      {"--grad-compression",
       parallel::grad_compression_name(c.compression.value_or(parallel::GradCompression::None))},
      {"--zero", zero_stage_name(c.sharding.value_or(parallel::Sharding::None))},
      {"--dp-replicas", replicas_name(c.dp_replicas.value_or(Replicas::Persistent))},
      {"--seed", std::to_string(o.setup.seed)},
      {"--memory-format", memory_format_flag_name(o.setup.memory_format)},
      {"--precision", nn::precision_name(c.precision)}};
  std::vector<std::string> args;
  for (const auto& [flag, value] : flags) args.insert(args.end(), {flag, value});
  if (o.backend) args.insert(args.end(), {"--backend", o.backend->name});
  if (o.setup.allow_slow_bf16) args.push_back("--allow-slow-bf16");
  if (o.phase_sync) args.push_back("--phase-sync");
  if (o.real) args.insert(args.end(), {"--real", "--data-dir", o.data_dir});
  if (o.real && !o.verify_data) args.push_back("--no-verify-data");
  if (!o.profile_dir.empty()) args.insert(args.end(), {"--profile", o.profile_dir});
  return args;
}

BenchConfig worker_config(const BenchOptions& o) {
  TANDEM_CHECK(!o.modes.empty() && !o.devices.empty() && !o.batch_sizes.empty(),
               "[bench_cifar] a worker needs one mode, device count and batch size");
  BenchConfig config{.mode = o.modes[0],
                     .devices = o.modes[0] == Mode::Single ? 1 : o.devices[0],
                     .batch = o.batch_sizes[0],
                     .precision = o.precisions.empty() ? nn::Precision::Float32 : o.precisions[0]};
  if (config.mode == Mode::Distributed) {
    config.overlap = o.overlaps.empty() ? Overlap::On : o.overlaps[0];
    config.compression =
        o.compressions.empty() ? parallel::GradCompression::None : o.compressions[0];
    config.sharding = o.shardings.empty() ? parallel::Sharding::None : o.shardings[0];
  }
  if (config.mode == Mode::DataParallel) {
    config.dp_replicas = o.dp_replicas.empty() ? Replicas::Persistent : o.dp_replicas[0];
  }
  return config;
}

SetupOptions default_bench_setup() {
  SetupOptions setup;
  setup.sgd = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f};
  return setup;
}

SetupOptions setup_options(const BenchOptions& o, const BenchConfig& config) {
  SetupOptions setup = o.setup;
  setup.mode = config.mode;
  setup.dp.persistent_replicas = config.dp_replicas != Replicas::Rebuilt;
  setup.ddp.reducer.overlap = config.overlap != Overlap::Off;
  setup.grad_compression = config.compression.value_or(parallel::GradCompression::None);
  setup.ddp.sharding = config.sharding.value_or(parallel::Sharding::None);
  setup.precision = config.precision;
  return setup;
}

int total_threads(const BenchOptions& o) {
  return o.threads > 0 ? o.threads : num_threads();
}

}  // namespace tandem::apps::bench
