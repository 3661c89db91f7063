#pragma once
/// What bench_cifar measures for one configuration, and its JSON form: a worker writes it, the
/// parent reads it back, and the --json report embeds it.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/bench/bench_options.h"

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

/// Means over the timed steps, unless said otherwise.
struct Measurement {
  std::string device = "cpu";  ///< kind of device the step ran on: cpu or cuda
  std::string device_list;     ///< e.g. "cpu:0,cpu:1"; ddp: one rank's device and the backend
  std::string memory_format = "contiguous";  ///< of the model and batches: or channels_last
  int processes = 1;
  int threads_per_process = 1;
  int64_t local_batch = 0;  ///< images per device (dp: the first replica's share)
  double images_per_s = 0;  ///< global batch × steps / wall time of the timed steps
  double ms_per_step = 0;
  double forward_ms = 0;   ///< forward and cross-entropy
  double backward_ms = 0;  ///< DDP: includes waiting for the last all-reduces (wait_ms)
  double optimizer_ms = 0;
  // DataParallel (parallel::DataParallelTimings)
  double scatter_ms = 0;
  double replicate_ms = 0;
  double apply_ms = 0;
  double gather_ms = 0;
  double reduce_ms = 0;
  // DDP (parallel::ReducerStepStats)
  double comm_ms = 0;          ///< all-reduce time per step, summed over buckets
  double hidden_fraction = 0;  ///< share of comm_ms that ran while backward was going
  double wait_ms = 0;          ///< how long the end of backward waited for the all-reduces
  /// Gradient bytes a rank hands to all-reduces per step (halved by fp16/bf16 compression;
  /// a ring all-reduce sends about twice this per rank).
  double grad_bytes_per_step = 0;
  std::vector<BucketStat> buckets;
  double peak_rss_mb = 0;  ///< peak resident set (MiB); ddp: the largest rank's
  double parameter_bytes = 0;
  double final_loss = 0;  ///< the last step's loss: a sanity check, not a metric
};

/// One row of the report: a configuration and what it measured, or why it failed.
struct BenchRow {
  BenchConfig config;
  std::optional<Measurement> measured{};
  std::optional<double> speedup{};     ///< images/s against one device at the same batch
  std::optional<double> efficiency{};  ///< speedup / devices
  std::string error{};                 ///< set when the configuration failed
};

nlohmann::ordered_json to_json(const Measurement& m);
Measurement measurement_from_json(const nlohmann::json& j);

}  // namespace tandem::apps::bench
