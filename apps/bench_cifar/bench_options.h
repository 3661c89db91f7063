#pragma once
/// bench_cifar's flags and the matrix of configurations they describe. Kept apart from the
/// runner so that tests can parse command lines and expand matrices without measuring anything.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "apps/common/flags.h"
#include "apps/common/mode.h"
#include "apps/common/spellings.h"
#include "apps/common/training_setup.h"
#include "engine/memory_format.h"
#include "nn/precision.h"
#include "parallel/comm/backends.h"
#include "parallel/comm/rendezvous/launch_env.h"
#include "parallel/comm_hook.h"
#include "parallel/reducer.h"

namespace tandem::apps::bench {

/// --device-type: where every mode runs.
enum class DeviceType {
  Auto,  ///< GPUs where CUDA can run, else CPU devices (gpus_by_default)
  Cpu,
  Cuda,
};
inline constexpr Spelling<DeviceType> kDeviceTypeSpellings[] = {
    {"auto", DeviceType::Auto}, {"cpu", DeviceType::Cpu}, {"cuda", DeviceType::Cuda}};

/// ddp: whether the all-reduces run while backward runs, or only after it.
enum class Overlap { On, Off };
inline constexpr Spelling<Overlap> kOverlapSpellings[] = {{"on", Overlap::On},
                                                          {"off", Overlap::Off}};
inline const char* overlap_name(Overlap overlap) {
  return name_in(kOverlapSpellings, overlap);
}
/// --overlap's words: one choice, or a row for each (both).
const std::vector<Spelling<std::vector<Overlap>>>& overlap_rows_spellings();

/// dp: replicas kept between steps and refreshed in place, or rebuilt every step as PyTorch does.
enum class Replicas { Persistent, Rebuilt };
inline constexpr Spelling<Replicas> kReplicasSpellings[] = {{"persistent", Replicas::Persistent},
                                                            {"rebuilt", Replicas::Rebuilt}};
inline const char* replicas_name(Replicas replicas) {
  return name_in(kReplicasSpellings, replicas);
}

/// --link: the interconnect(s) the projection models.
enum class Link { NvLink, Pcie, Both };
inline constexpr Spelling<Link> kLinkSpellings[] = {
    {"nvlink", Link::NvLink}, {"pcie", Link::Pcie}, {"both", Link::Both}};

/// What every row builds before any flag: the library's defaults, with the SGD the timed steps
/// run (lr 0.05, momentum 0.9, weight decay 5e-4). A function for the reason of
/// default_train_setup (apps/train_cifar/train_options.h).
SetupOptions default_bench_setup();

struct BenchOptions {
  std::vector<Mode> modes{Mode::Single, Mode::DataParallel, Mode::Distributed};
  std::vector<int> devices{1, 2};  ///< dp: devices; ddp: processes
  DeviceType device_type = DeviceType::Auto;
  /// ddp's process group, a row of parallel::backends(); null: nccl on GPUs, else gloo. mpi:
  /// mpirun starts the ranks.
  const parallel::BackendInfo* backend = nullptr;
  std::vector<int64_t> batch_sizes{128};  ///< global
  /// What every row builds, bound straight from the flags (Note [Options bound once]): --arch,
  /// --seed (which also seeds the synthetic images), --memory-format, --bucket-cap-mb,
  /// --first-bucket-mb and --allow-slow-bf16, with SGD as the timed steps run it. Each row sets
  /// its own mode, precision, overlap, compression and replicas (setup_options).
  SetupOptions setup = default_bench_setup();
  int warmup = 2;
  int steps = 5;
  /// Wait for the devices after every phase of a timed step, as before 2026-11-27 (Note [Phase
  /// timing] in apps/bench_cifar/timed_steps.h).
  bool phase_sync = false;
  /// Measurements of each configuration, in rounds over the matrix (Note [Repeats] in
  /// apps/bench_cifar/repeats.h): the report shows their median and min–max.
  int repeats = 3;
  int threads = 0;  ///< CPU threads in all; 0: TANDEM_NUM_THREADS or all cores
  std::vector<Overlap> overlaps{Overlap::On};  ///< ddp: a row for each (--overlap both: on, off)
  /// ddp: gradient compression, a row for each
  std::vector<parallel::GradCompression> compressions{parallel::GradCompression::None};
  /// ddp: ZeRO's stage (--zero), a row for each
  std::vector<parallel::Sharding> shardings{parallel::Sharding::None};
  std::vector<Replicas> dp_replicas{Replicas::Persistent};        ///< dp: a row for each
  std::vector<nn::Precision> precisions{nn::Precision::Float32};  ///< a row for each
  bool real = false;
  std::string data_dir;     ///< --data-dir; empty: the default places (Note [Default data folder])
  bool verify_data = true;  ///< --real: check the files' md5 sums (--no-verify-data: do not)
  std::string json;
  /// --profile: a folder for each configuration's profile (apps/bench_cifar/profiled_steps.h)
  std::string profile_dir;

  bool project = false;
  std::vector<int> project_gpus{2, 4, 8};
  Link link = Link::NvLink;
  double nvlink_gbps = 150;
  double pcie_gbps = 12;
  double latency_us = 20;

  /// Hidden: this process is a worker measuring one configuration (the first of each list) and
  /// writes its result to this file.
  std::string worker_json;
};

/// One cell of the matrix.
struct BenchConfig {
  Mode mode = Mode::Single;
  int devices = 1;                   ///< dp: devices; ddp: processes; single: 1
  int64_t batch = 128;               ///< global
  std::optional<Overlap> overlap{};  ///< ddp only
  std::optional<parallel::GradCompression> compression{};  ///< ddp only
  std::optional<parallel::Sharding> sharding{};            ///< ddp only (--zero)
  std::optional<Replicas> dp_replicas{};                   ///< dp only
  nn::Precision precision = nn::Precision::Float32;        ///< Note [Mixed precision]

  /// e.g. "ddp x2 b128 overlap on", "ddp x2 b128 overlap on bf16" (compressed gradients), "ddp x2
  /// b128 overlap on zero 2" (sharded), "dp x2 b128 rebuilt replicas", "single x1 b128 amp bf16"
  /// (mixed precision)
  std::string label() const;
  friend bool operator==(const BenchConfig&, const BenchConfig&) = default;
};

/// Parses argv. Returns false after printing help (exit 0); throws tandem::Error
/// ("[bench_cifar] …", one line) for a bad flag or value.
bool parse_bench_options(int argc, const char* const* argv, BenchOptions& options);

/// Checks what CLI11 cannot (combinations).
void validate(const BenchOptions& options);
/// --real: sets data_dir to the folder to read (--data-dir's, else the first default place; Note
/// [Default data folder]) and prints the old place's notice; throws when there is none.
void choose_data(BenchOptions& options, const parallel::EnvLookup& environment);

/// The configurations in the order they run: batch sizes, then modes, then device counts, then
/// overlap, compression or replicas. single runs once per batch size, whatever --devices says.
std::vector<BenchConfig> expand_matrix(const BenchOptions& options);

/// Why `config` cannot run, or empty (e.g. a ddp batch that does not split over the processes).
std::string config_problem(const BenchConfig& config);

/// The command-line arguments (after the program name) of a worker measuring `config`.
std::vector<std::string> worker_arguments(const BenchOptions& options, const BenchConfig& config,
                                          const std::string& result_path);

/// The configuration a worker measures: the first entry of each list.
BenchConfig worker_config(const BenchOptions& options);

/// What a worker measuring `config` builds: options.setup with the row's mode, replicas, overlap,
/// compression and precision.
SetupOptions setup_options(const BenchOptions& options, const BenchConfig& config);

/// Threads for the whole benchmark: --threads, else TANDEM_NUM_THREADS or all cores.
int total_threads(const BenchOptions& options);

}  // namespace tandem::apps::bench
