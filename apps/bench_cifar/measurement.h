#pragma once
/// What bench_cifar knows of one configuration, and the table of its metrics: a worker measures
/// a Measurement and writes it as JSON, the parent reads it back, works out the scaling and
/// reports it. Every metric is listed once, in kMetrics, which the JSON (worker result and
/// report rows), the terminal table and the per-step means all go through: a new metric is a
/// field and its entry.

#include <array>
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
  MemoryFormat memory_format = MemoryFormat::Contiguous;  ///< of the model and batches
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
  /// FLOPs of one image's training step (Note [Counting FLOPs] in nn/flop_count.h)
  double flops_per_image = 0;
  double gflop_per_s = 0;  ///< flops_per_image × images_per_s
  /// gflop_per_s against the convolution peak of the row's precision (Note [Convolution peak]);
  /// NaN (JSON null) without one. The parent sets it (add_peak_fractions).
  double peak_fraction = std::numeric_limits<double>::quiet_NaN();
  double peak_rss_mb = 0;  ///< peak resident set (MiB); ddp: the largest rank's
  double parameter_bytes = 0;
  /// ddp: bytes of parameters, gradients (at their peak in a step) and optimizer state that a
  /// rank holds, counted (Note [Counted memory] in parallel/zero/sharding.h); the largest rank's
  double state_bytes = 0;
  double final_loss = 0;  ///< the last step's loss: a sanity check, not a metric
  std::vector<BucketStat> buckets;
};

/// How a metric is gathered over the timed steps.
enum class Mean {
  Once,      ///< set once for the run
  PerStep,   ///< the mean of each step's value (add_step, set_step_means)
  CommShare  ///< a share of comm_ms: each step's value weighted by its comm_ms
};

/// How the terminal table shows a metric (× 100 for Percent, bytes as MiB for MiB).
enum class Cell { None, Decimal, Ratio, Percent, MiB, Whole };

/// One number of a Measurement, wherever it appears.
struct Metric {
  const char* key;  ///< in the worker's JSON and in each --json report row
  double Measurement::*field;
  std::optional<Mode> only;  ///< a dp- or ddp-only metric: null (and "-") in other rows
  Mean mean;
  const char* heading;  ///< terminal table column, or nullptr (Cell::None)
  Cell cell;
};

/// Every metric, in the order of the report rows' keys and of the terminal table's columns.
inline constexpr auto kMetrics = [] {
  using enum Mean;
  using enum Cell;
  using M = Measurement;
  constexpr std::optional<Mode> kAll, kDp = Mode::DataParallel, kDdp = Mode::Distributed;
  // clang-format off
  return std::to_array<Metric>({
  // key                    field                    only  mean       heading          cell
    {"images_per_s",        &M::images_per_s,        kAll, Once,      "images/s",      Decimal},
    {"ms_per_step",         &M::ms_per_step,         kAll, Once,      "ms/step",       Decimal},
    {"speedup",             &M::speedup,             kAll, Once,      "speed-up",      Ratio},
    {"efficiency",          &M::efficiency,          kAll, Once,      "eff.",          Percent},
    {"forward_ms",          &M::forward_ms,          kAll, PerStep,   nullptr,         None},
    {"backward_ms",         &M::backward_ms,         kAll, PerStep,   nullptr,         None},
    {"optimizer_ms",        &M::optimizer_ms,        kAll, PerStep,   nullptr,         None},
    {"comm_ms",             &M::comm_ms,             kDdp, PerStep,   "comm ms",       Decimal},
    {"hidden_fraction",     &M::hidden_fraction,     kDdp, CommShare, "hidden",        Percent},
    {"wait_ms",             &M::wait_ms,             kDdp, PerStep,   nullptr,         None},
    {"grad_bytes_per_step", &M::grad_bytes_per_step, kDdp, PerStep,   "grad MiB/step", MiB},
    {"scatter_ms",          &M::scatter_ms,          kDp,  PerStep,   "scatter ms",    Decimal},
    {"replicate_ms",        &M::replicate_ms,        kDp,  PerStep,   "replicate ms",  Decimal},
    {"apply_ms",            &M::apply_ms,            kDp,  PerStep,   nullptr,         None},
    {"gather_ms",           &M::gather_ms,           kDp,  PerStep,   "gather ms",     Decimal},
    {"reduce_ms",           &M::reduce_ms,           kDp,  PerStep,   "reduce ms",     Decimal},
    {"flops_per_image",     &M::flops_per_image,     kAll, Once,      nullptr,         None},
    {"gflop_per_s",         &M::gflop_per_s,         kAll, Once,      "GFLOP/s",       Decimal},
    {"peak_fraction",       &M::peak_fraction,       kAll, Once,      "% of peak",     Percent},
    {"peak_rss_mb",         &M::peak_rss_mb,         kAll, Once,      "peak RSS MiB",  Whole},
    {"parameter_bytes",     &M::parameter_bytes,     kAll, Once,      nullptr,         None},
    {"state_bytes",         &M::state_bytes,         kDdp, Once,      "state MiB",     MiB},
    {"final_loss",          &M::final_loss,          kAll, Once,      nullptr,         None},
  });

  // clang-format on
}();

/// Whether `metric` applies to rows of `mode`.
inline bool applies(const Metric& metric, Mode mode) {
  return !metric.only || *metric.only == mode;
}

/// Adds one step's PerStep and CommShare metrics to `sums` (CommShare ones × the step's comm_ms).
void add_step(Measurement& sums, const Measurement& step);
/// Sets m's PerStep and CommShare metrics to their means over `steps` steps summed by add_step.
void set_step_means(Measurement& m, const Measurement& sums, int steps);

/// One row of the report: a configuration and what it measured, or why it failed.
struct BenchRow {
  BenchConfig config;
  /// With --repeats: each metric's median over the repeats (median_measurement in repeats.h).
  std::optional<Measurement> measured{};
  std::string error{};  ///< set when the configuration failed
  /// images/s of each repeat, in the order they ran; empty when it failed (or was never repeated).
  std::vector<double> images_per_s_samples{};
};

/// The fields before the metrics (device … local_batch): where and how the step ran.
nlohmann::ordered_json where_json(const Measurement& m);
/// where_json, every metric and the buckets.
nlohmann::ordered_json to_json(const Measurement& m);
/// The inverse of to_json (null, as JSON writes NaN, reads back as NaN).
Measurement measurement_from_json(const nlohmann::json& j);
/// A metric's value in JSON: null for NaN, which JSON cannot hold.
nlohmann::ordered_json metric_json(double value);

}  // namespace tandem::apps::bench
