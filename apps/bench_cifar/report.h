#pragma once
/// bench_cifar's outputs: the table on the terminal (a Markdown table, so it pastes into
/// docs/benchmarks.md), the projection below it, and the same rows as JSON (--json), which also
/// holds the per-bucket timings, the options, the machine and the projection. Both take their
/// metrics from kMetrics (apps/bench_cifar/measurement.h).

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/bench_cifar/conv_peak.h"
#include "apps/bench_cifar/measurement.h"
#include "apps/bench_cifar/projection_report.h"

namespace tandem::apps::bench {

/// What the report says about the run as a whole.
struct RunInfo {
  std::string date{};  ///< local, "2026-11-23 14:05"
  std::string cpu{};   ///< the model name in /proc/cpuinfo
  int cpus = 0;        ///< logical CPUs this process may run on
  int threads = 0;     ///< total_threads(options)
  bool cuda = false;   ///< GPUs were present
  /// The 1-minute load average when the run began (/proc/loadavg; -1 where unknown): above the
  /// cores' idle share the numbers measure the other jobs as much as Tandem.
  double load_average = -1;
  std::string version{};                ///< tandem_version(): the version and commit measured
  std::optional<ConvPeak> conv_peak{};  ///< Note [Convolution peak]; nullopt on GPUs
};

RunInfo current_run_info(const BenchOptions& options);

/// Warnings (stderr) for rows no real scaling gives: efficiency above 100 % means the one-device
/// row was slowed by something else (a busy machine), so the table's ratios mean little; and for
/// rows whose repeats disagree by more than kSpreadWarning (apps/bench_cifar/repeats.h).
void print_warnings(std::FILE* out, const RunInfo& info, const std::vector<BenchRow>& rows);

/// The keys of a JSON row (the lists images_per_s_samples and bucket_timings aside), in order.
/// The metrics are medians over the repeats; repeats, images_per_s_min and _max follow them.
std::vector<std::string> row_columns();
/// A row as a flat JSON object with row_columns() as keys (null where a column does not apply
/// or the row failed).
nlohmann::ordered_json row_to_json(const BenchRow& row, const BenchOptions& options);

/// One line on the configuration, then the table.
void print_table(std::FILE* out, const BenchOptions& options, const RunInfo& info,
                 const std::vector<BenchRow>& rows);
/// Titled "PROJECTION (not measured)".
void print_projection(std::FILE* out, const BenchOptions& options, const ProjectionReport& report);

void write_json(const std::string& path, const BenchOptions& options, const RunInfo& info,
                const std::vector<BenchRow>& rows,
                const std::optional<ProjectionReport>& projection);

}  // namespace tandem::apps::bench
