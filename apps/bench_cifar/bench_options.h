#pragma once
/// bench_cifar's flags and the matrix of configurations they describe. Kept apart from the
/// runner so that tests can parse command lines and expand matrices without measuring anything.

#include <cstdint>
#include <string>
#include <vector>

#include "apps/common/mode.h"
#include "nn/precision.h"

namespace tandem::apps::bench {

struct BenchOptions {
  std::vector<Mode> modes{Mode::Single, Mode::DataParallel, Mode::Distributed};
  std::vector<int> devices{1, 2};         ///< dp: devices; ddp: processes
  std::string device_type = "auto";       ///< auto (GPUs where CUDA can run), cpu or cuda
  std::vector<int64_t> batch_sizes{128};  ///< global
  std::string arch = "resnet20";
  int warmup = 2;
  int steps = 5;
  /// Measurements of each configuration, in rounds over the matrix (Note [Repeats] in
  /// apps/bench_cifar/repeats.h): the report shows their median and min–max.
  int repeats = 3;
  int threads = 0;                     ///< CPU threads in all; 0: TANDEM_NUM_THREADS or all cores
  std::string memory_format = "auto";  ///< auto (the device's fastest), channels_last, contiguous
  double bucket_cap_mb = 25;
  double first_bucket_mb = 1;                     ///< clamped to bucket_cap_mb
  std::string overlap = "on";                     ///< on, off or both
  std::vector<std::string> compressions{"none"};  ///< ddp: gradient compression, a row for each
  std::vector<std::string> dp_replicas{"persistent"};  ///< dp: persistent, rebuilt; a row for each
  std::vector<nn::Precision> precisions{nn::Precision::Float32};  ///< a row for each
  bool allow_slow_bf16 = false;  ///< bf16 even where the CPU emulates it
  bool real = false;
  std::string data_dir = "./data/cifar-10-batches-bin";
  uint64_t seed = 0;
  std::string json;

  bool project = false;
  std::vector<int> project_gpus{2, 4, 8};
  std::string link = "nvlink";  ///< nvlink, pcie or both
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
  int devices = 1;            ///< dp: devices; ddp: processes; single: 1
  int64_t batch = 128;        ///< global
  std::string overlap{};      ///< ddp: "on" or "off"; otherwise empty
  std::string compression{};  ///< ddp: "none", "fp16" or "bf16"; otherwise empty
  std::string dp_replicas{};  ///< dp: "persistent" or "rebuilt" (every step); otherwise empty
  nn::Precision precision = nn::Precision::Float32;  ///< Note [Mixed precision]

  /// e.g. "ddp x2 b128 overlap on", "ddp x2 b128 overlap on bf16" (compressed gradients), "dp x2
  /// b128 rebuilt replicas", "single x1 b128 amp bf16" (mixed precision)
  std::string label() const;
  friend bool operator==(const BenchConfig&, const BenchConfig&) = default;
};

/// Parses argv. Returns false after printing help (exit 0); throws tandem::Error
/// ("[bench_cifar] …", one line) for a bad flag or value.
bool parse_bench_options(int argc, const char* const* argv, BenchOptions& options);

/// Checks what CLI11 cannot (combinations, the data folder).
void validate(const BenchOptions& options);

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

/// Threads for the whole benchmark: --threads, else TANDEM_NUM_THREADS or all cores.
int total_threads(const BenchOptions& options);

}  // namespace tandem::apps::bench
