#pragma once
/// The parent side of bench_cifar: runs each configuration of the matrix in fresh worker
/// processes (Note [One process per configuration] in apps/bench_cifar/worker.h) through
/// parallel::launch, reads their results back and works out the scaling.
///
///   WorkArea area;
///   std::vector<BenchRow> rows = run_matrix(options, area, print_progress);

#include <filesystem>
#include <functional>
#include <vector>

#include "apps/bench_cifar/bench_options.h"
#include "apps/bench_cifar/measurement.h"

namespace tandem::apps::bench {

/// A private temporary folder for the workers' result files and logs, removed with its
/// contents when it goes out of scope.
class WorkArea {
 public:
  WorkArea();
  ~WorkArea();
  WorkArea(const WorkArea&) = delete;
  WorkArea& operator=(const WorkArea&) = delete;

  /// A fresh path in the folder, e.g. "config3.json".
  std::filesystem::path next(const std::string& extension);

 private:
  std::filesystem::path path_;
  int count_ = 0;
};

/// Measures one configuration in its own worker process(es): one for single and dp, one per rank
/// for ddp. A failure comes back as the row's error, never as an exception.
BenchRow run_config(const BenchOptions& options, const BenchConfig& config, WorkArea& area);

/// Where one measurement falls in the whole run, for progress output.
struct Progress {
  size_t run = 0;   ///< 0-based, over every repeat of every configuration
  size_t runs = 0;  ///< configurations × --repeats
  int repeat = 0;   ///< 0-based
  int repeats = 1;
};

/// Called after each measurement with its one-sample row, for progress output.
using RowCallback = std::function<void(const BenchRow&, const Progress&)>;

/// Measures every configuration of expand_matrix(options) --repeats times, in rounds over the
/// matrix (Note [Repeats] in apps/bench_cifar/repeats.h), then fills in the scaling from the
/// medians. A configuration that fails is not measured again: its row holds the error.
std::vector<BenchRow> run_matrix(const BenchOptions& options, WorkArea& area,
                                 const RowCallback& on_row = {});

/// One row per configuration from its repeats' measurements (`samples[i]`, for `rows[i]`):
/// the median of each metric, and the images/s of each repeat. Rows with an error stay failed.
void combine_repeats(std::vector<BenchRow>& rows,
                     const std::vector<std::vector<Measurement>>& samples);

/// Speed-up and efficiency of each measured row against one device at the same batch: the
/// single row when there is one, else the same mode's one-device row (same overlap).
void add_scaling(std::vector<BenchRow>& rows);

}  // namespace tandem::apps::bench
