#pragma once
/// bench_cifar's outputs: the table on the terminal (a Markdown table, so it pastes into
/// docs/benchmarks.md), the projection below it, and the same rows as CSV and JSON.
/// CSV and JSON rows have the same columns (row_columns()); JSON adds per-bucket timings, the
/// options, the machine and the projection.

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/bench/measurement.h"
#include "apps/bench/projection_report.h"

namespace tandem::apps::bench {

/// What the report says about the run as a whole.
struct RunInfo {
  std::string date;   ///< local_date_time()
  std::string cpu;    ///< cpu_model()
  int cpus = 0;       ///< cpu_count()
  int threads = 0;    ///< total_threads(options)
  bool cuda = false;  ///< GPUs were present
};

RunInfo current_run_info(const BenchOptions& options);

/// The keys of a row in CSV and JSON, in order.
std::vector<std::string> row_columns();
/// A row as a flat JSON object with row_columns() as keys (null where a column does not apply
/// or the row failed).
nlohmann::ordered_json row_to_json(const BenchRow& row, const BenchOptions& options);

/// One line on the configuration, then the table.
void print_table(std::FILE* out, const BenchOptions& options, const RunInfo& info,
                 const std::vector<BenchRow>& rows);
/// Titled "PROJECTION (not measured)".
void print_projection(std::FILE* out, const BenchOptions& options, const ProjectionReport& report);

void write_csv(const std::string& path, const BenchOptions& options,
               const std::vector<BenchRow>& rows);
void write_json(const std::string& path, const BenchOptions& options, const RunInfo& info,
                const std::vector<BenchRow>& rows,
                const std::optional<ProjectionReport>& projection);

/// The projection as JSON (part of write_json's file).
nlohmann::ordered_json projection_to_json(const ProjectionReport& report);

}  // namespace tandem::apps::bench
