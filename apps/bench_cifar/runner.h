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

/// Called after each configuration, for progress output: (row, index, count).
using RowCallback = std::function<void(const BenchRow&, size_t, size_t)>;

/// Runs every configuration of expand_matrix(options) in order, then fills in the scaling.
std::vector<BenchRow> run_matrix(const BenchOptions& options, WorkArea& area,
                                 const RowCallback& on_row = {});

/// Speed-up and efficiency of each measured row against one device at the same batch: the
/// single row when there is one, else the same mode's one-device row (same overlap).
void add_scaling(std::vector<BenchRow>& rows);

}  // namespace tandem::apps::bench
