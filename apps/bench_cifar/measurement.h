#pragma once
/// What bench_cifar knows of one configuration, and the table of its metrics: a worker measures
/// a Measurement and writes it as JSON, the parent reads it back, works out the scaling and
/// reports it. Every metric is listed once, in kMetrics, which the JSON (worker result and
/// report rows), the terminal table and the per-step means all go through: a new metric is a
/// field and its entry.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/bench_cifar/bench_options.h"

namespace tandem::apps::bench {

/// One DDP gradient bucket, averaged over the timed steps; times in ms relative to the end of
/// backward (negative: before it ended), as parallel::BucketTiming.
struct BucketStat {
  size_t parameters = 0;
  double bytes = 0;
  double ready_ms = 0;
  double started_ms = 0;
  double ended_ms = 0;
};

/// Measured by the worker (means over the timed steps unless said otherwise), except speedup and
/// efficiency, which the parent works out against another row (add_scaling).
struct Measurement {
  std::string device = "cpu";  ///< kind of device the step ran on: cpu or cuda
  std::string device_list;     ///< e.g. "cpu:0,cpu:1"; ddp: one rank's device and the backend
  std::string memory_format = "contiguous";  ///< of the model and batches: or channels_last
  int processes = 1;
  int threads_per_process = 1;
  int64_t local_batch = 0;  ///< images per device (dp: the first replica's share)
  double images_per_s = 0;  ///< global batch × steps / wall time of the timed steps
  double ms_per_step = 0;
  /// images/s against one device at the same batch; NaN (JSON null) without such a row
  double speedup = std::numeric_limits<double>::quiet_NaN();
  double efficiency = std::numeric_limits<double>::quiet_NaN();  ///< speedup / devices
  double forward_ms = 0;                                         ///< forward and cross-entropy
  double backward_ms = 0;  ///< DDP: includes waiting for the last all-reduces (wait_ms)
  double optimizer_ms = 0;
  // DDP (parallel::ReducerStepStats)
  double comm_ms = 0;          ///< all-reduce time per step, summed over buckets
  double hidden_fraction = 0;  ///< share of comm_ms that ran while backward was going
  double wait_ms = 0;          ///< how long the end of backward waited for the all-reduces
  /// Gradient bytes a rank hands to all-reduces per step (halved by fp16/bf16 compression;
  /// a ring all-reduce sends about twice this per rank).
  double grad_bytes_per_step = 0;
  // DataParallel (parallel::DataParallelTimings)
  double scatter_ms = 0;
  double replicate_ms = 0;
  double apply_ms = 0;
  double gather_ms = 0;
  double reduce_ms = 0;
  double peak_rss_mb = 0;  ///< peak resident set (MiB); ddp: the largest rank's
  double parameter_bytes = 0;
  double final_loss = 0;  ///< the last step's loss: a sanity check, not a metric
  std::vector<BucketStat> buckets;
};

/// One number of a Measurement, wherever it appears.
struct Metric {
  const char* key;  ///< in the worker's JSON and in each --json report row
  double Measurement::*field;
  std::optional<Mode> only{};  ///< a dp- or ddp-only metric: null (and "-") in other rows
  bool per_step = false;       ///< a mean over the timed steps (add_step, set_step_means)
  double Measurement::*weight = nullptr;  ///< per_step: the mean is weighted by this metric
  const char* heading = nullptr;          ///< terminal table column; nullptr: JSON only
  const char* format = "%.1f";            ///< of the cell (printf), after × scale
  double scale = 1;
};

inline constexpr double kMiB = 1024.0 * 1024.0;

/// In the order of the report rows' keys and of the terminal table's columns.
inline constexpr Metric kMetrics[] = {
    {.key = "images_per_s", .field = &Measurement::images_per_s, .heading = "images/s"},
    {.key = "ms_per_step", .field = &Measurement::ms_per_step, .heading = "ms/step"},
    {.key = "speedup", .field = &Measurement::speedup, .heading = "speed-up", .format = "%.2f"},
    {.key = "efficiency",
     .field = &Measurement::efficiency,
     .heading = "eff.",
     .format = "%.0f %%",
     .scale = 100},
    {.key = "forward_ms", .field = &Measurement::forward_ms, .per_step = true},
    {.key = "backward_ms", .field = &Measurement::backward_ms, .per_step = true},
    {.key = "optimizer_ms", .field = &Measurement::optimizer_ms, .per_step = true},
    {.key = "comm_ms",
     .field = &Measurement::comm_ms,
     .only = Mode::Distributed,
     .per_step = true,
     .heading = "comm ms"},
    {.key = "hidden_fraction",
     .field = &Measurement::hidden_fraction,
     .only = Mode::Distributed,
     .per_step = true,
     .weight = &Measurement::comm_ms,
     .heading = "hidden",
     .format = "%.0f %%",
     .scale = 100},
    {.key = "wait_ms", .field = &Measurement::wait_ms, .only = Mode::Distributed, .per_step = true},
    {.key = "grad_bytes_per_step",
     .field = &Measurement::grad_bytes_per_step,
     .only = Mode::Distributed,
     .per_step = true,
     .heading = "grad MiB/step",
     .format = "%.2f",
     .scale = 1 / kMiB},
    {.key = "scatter_ms",
     .field = &Measurement::scatter_ms,
     .only = Mode::DataParallel,
     .per_step = true,
     .heading = "scatter ms"},
    {.key = "replicate_ms",
     .field = &Measurement::replicate_ms,
     .only = Mode::DataParallel,
     .per_step = true,
     .heading = "replicate ms"},
    {.key = "apply_ms",
     .field = &Measurement::apply_ms,
     .only = Mode::DataParallel,
     .per_step = true},
    {.key = "gather_ms",
     .field = &Measurement::gather_ms,
     .only = Mode::DataParallel,
     .per_step = true,
     .heading = "gather ms"},
    {.key = "reduce_ms",
     .field = &Measurement::reduce_ms,
     .only = Mode::DataParallel,
     .per_step = true,
     .heading = "reduce ms"},
    {.key = "peak_rss_mb",
     .field = &Measurement::peak_rss_mb,
     .heading = "peak RSS MiB",
     .format = "%.0f"},
    {.key = "parameter_bytes", .field = &Measurement::parameter_bytes},
    {.key = "final_loss", .field = &Measurement::final_loss},
};

/// Whether `metric` applies to rows of `mode`.
inline bool applies(const Metric& metric, Mode mode) {
  return !metric.only || *metric.only == mode;
}

/// Adds one step's per-step metrics to `sums` (a weighted one multiplied by its weight).
void add_step(Measurement& sums, const Measurement& step);
/// Sets m's per-step metrics to the means of `steps` steps that add_step summed into `sums`.
void set_step_means(Measurement& m, const Measurement& sums, int steps);

/// One row of the report: a configuration and what it measured, or why it failed.
struct BenchRow {
  BenchConfig config;
  std::optional<Measurement> measured{};
  std::string error{};  ///< set when the configuration failed
};

nlohmann::ordered_json to_json(const Measurement& m);
/// The inverse of to_json (null, as JSON writes NaN, reads back as NaN).
Measurement measurement_from_json(const nlohmann::json& j);
/// A metric's value in JSON: null for NaN, which JSON cannot hold.
nlohmann::ordered_json metric_json(double value);

}  // namespace tandem::apps::bench
