// The JSON output of bench_cifar (apps/bench_cifar/report.h).
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <thread>

#include "apps/bench_cifar/repeats.h"
#include "apps/bench_cifar/report.h"
#include "apps/common/version.h"
#include "engine/device_runtime.h"
#include "engine/error.h"

namespace tandem::apps::bench {
namespace {

using nlohmann::ordered_json;

// Each value by its name (Note [Typed options]).
template <typename T, typename Name>
std::vector<std::string> names(const std::vector<T>& values, Name name) {
  std::vector<std::string> out;
  out.reserve(values.size());
  for (const T& value : values) out.emplace_back(name(value));
  return out;
}

// null where the field does not apply to the row.
template <typename T, typename Name>
ordered_json name_or_null(const std::optional<T>& value, Name name) {
  return value ? ordered_json(name(*value)) : ordered_json(nullptr);
}

ordered_json text_or_null(const std::string& text) {
  return text.empty() ? ordered_json(nullptr) : ordered_json(text);
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  TANDEM_CHECK(out.good(), "[bench_cifar] cannot write ", path);
}

ordered_json options_to_json(const BenchOptions& o) {
  std::vector<std::string> modes;
  for (Mode mode : o.modes) modes.emplace_back(mode_name(mode));
  return {{"modes", modes},
          {"devices", o.devices},
          {"device_type", name_in(kDeviceTypeSpellings, o.device_type)},
          {"backend", o.backend ? o.backend->name : "auto"},
          {"batch_sizes", o.batch_sizes},
          {"arch", o.setup.arch},
          {"warmup", o.warmup},
          {"steps", o.steps},
          {"phase_sync", o.phase_sync},
          {"repeats", o.repeats},
          {"threads", o.threads},
          {"bucket_cap_mb", o.setup.ddp.reducer.bucket_cap_mb},
          {"first_bucket_mb", o.setup.ddp.reducer.first_bucket_mb},
          {"overlap", name_in(overlap_rows_spellings(), o.overlaps)},
          {"grad_compression", names(o.compressions, parallel::grad_compression_name)},
          {"zero", names(o.shardings, zero_stage_name)},
          {"dp_replicas", names(o.dp_replicas, replicas_name)},
          {"precision", names(o.precisions, nn::precision_name)},
          {"data", o.real ? o.data_dir : "synthetic"},
          {"seed", o.setup.seed}};
}

ordered_json peak_to_json(const ConvPeak& peak) {
  return {{"convolution", peak.convolution},
          {"threads", peak.threads},
          {"float32_gflop_per_s", peak.float32_gflops},
          {"bfloat16_gflop_per_s",
           peak.bfloat16_gflops ? ordered_json(*peak.bfloat16_gflops) : ordered_json(nullptr)},
          {"bfloat16_note", text_or_null(peak.bfloat16_note)}};
}

ordered_json projection_to_json(const ProjectionReport& report) {
  ordered_json j = {
      {"title", "PROJECTION (not measured)"}, {"compute_device", report.compute_device},
      {"links", ordered_json::array()},       {"profiles", ordered_json::array()},
      {"rows", ordered_json::array()},        {"notes", report.notes}};
  for (const LinkModel& link : report.links) {
    j["links"].push_back(
        {{"name", link.name}, {"bus_gbps", link.bus_gbps}, {"latency_us", link.latency_us}});
  }
  for (const ComputeProfile& p : report.profiles) {
    ordered_json buckets = ordered_json::array();
    for (const BucketReady& b : p.buckets)
      buckets.push_back({{"ready_ms", b.ready_ms}, {"bytes", b.bytes}});
    j["profiles"].push_back({{"batch", p.batch},
                             {"forward_ms", p.forward_ms},
                             {"backward_ms", p.backward_ms},
                             {"optimizer_ms", p.optimizer_ms},
                             {"parameter_bytes", p.parameter_bytes},
                             {"buckets", buckets}});
  }
  for (const ProjectionRow& row : report.rows) {
    const ProjectedStep& s = row.step;
    j["rows"].push_back({{"link", row.link},
                         {"mode", mode_name(s.mode)},
                         {"gpus", s.gpus},
                         {"global_batch", s.global_batch},
                         {"local_batch", s.local_batch},
                         {"compute_ms", s.compute_ms},
                         {"comm_ms", s.comm_ms},
                         {"exposed_ms", s.exposed_ms},
                         {"step_ms", s.step_ms},
                         {"images_per_s", s.images_per_s},
                         {"speedup", s.speedup},
                         {"efficiency", s.efficiency},
                         {"scatter_ms", s.scatter_ms},
                         {"replicate_ms", s.replicate_ms},
                         {"reduce_ms", s.reduce_ms},
                         {"gather_ms", s.gather_ms}});
  }
  return j;
}

}  // namespace

RunInfo current_run_info(const BenchOptions& options) {
  RunInfo info;
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M", &local);
  info.date = date;
  info.cpu = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    const size_t colon = line.find(':');
    if (line.rfind("model name", 0) == 0 && colon != std::string::npos) {
      info.cpu = line.substr(std::min(line.size(), colon + 2));
      break;
    }
  }
  info.cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  info.threads = total_threads(options);
  std::ifstream loadavg("/proc/loadavg");
  if (!(loadavg >> info.load_average)) info.load_average = -1;
  info.version = tandem_version();
  info.cuda = cuda_available();
  return info;
}

std::vector<std::string> row_columns() {
  const ordered_json row = row_to_json(BenchRow{}, BenchOptions{});
  std::vector<std::string> keys;
  for (const auto& [key, value] : row.items()) keys.push_back(key);
  return keys;
}

ordered_json row_to_json(const BenchRow& row, const BenchOptions& options) {
  const BenchConfig& c = row.config;
  const bool ddp = c.mode == Mode::Distributed;
  ordered_json j = {
      {"mode", mode_name(c.mode)},
      {"devices", c.devices},
      {"batch_size", c.batch},
      {"overlap", name_or_null(c.overlap, overlap_name)},
      {"grad_compression", name_or_null(c.compression, parallel::grad_compression_name)},
      {"zero", name_or_null(c.sharding, zero_stage_name)},
      {"dp_replicas", name_or_null(c.dp_replicas, replicas_name)},
      {"precision", nn::precision_name(c.precision)},
      {"bucket_cap_mb", ddp ? ordered_json(options.setup.ddp.reducer.bucket_cap_mb) : nullptr}};
  // Where it ran (device … local_batch), as the worker reported it.
  const ordered_json where = where_json(row.measured.value_or(Measurement{}));
  for (const auto& [key, value] : where.items()) j[key] = row.measured ? value : nullptr;
  for (const Metric& metric : kMetrics) {
    j[metric.key] = row.measured && applies(metric, c.mode)
                        ? metric_json(row.measured.value().*metric.field)
                        : nullptr;
  }
  // The metrics above are medians over the repeats; how far apart the repeats' images/s were:
  const std::optional<Spread> spread =
      row.measured ? std::optional(images_per_s_spread(row)) : std::nullopt;
  j["repeats"] =
      row.measured ? ordered_json(std::max<size_t>(1, row.images_per_s_samples.size())) : nullptr;
  j["images_per_s_min"] = spread ? ordered_json(spread->min) : nullptr;
  j["images_per_s_max"] = spread ? ordered_json(spread->max) : nullptr;
  j["buckets"] = row.measured && ddp ? ordered_json(row.measured->buckets.size()) : nullptr;
  j["error"] = text_or_null(row.error);
  return j;
}

void write_json(const std::string& path, const BenchOptions& options, const RunInfo& info,
                const std::vector<BenchRow>& rows,
                const std::optional<ProjectionReport>& projection) {
  ordered_json j = {{"benchmark", "bench_cifar"},
                    {"date", info.date},
                    {"machine", {{"cpu", info.cpu}, {"cpus", info.cpus}, {"cuda", info.cuda}}},
                    {"threads", info.threads},
                    {"load_average", info.load_average},
                    {"conv_peak", info.conv_peak ? peak_to_json(*info.conv_peak) : nullptr},
                    {"version", info.version},
                    {"options", options_to_json(options)},
                    {"rows", ordered_json::array()}};
  for (const BenchRow& row : rows) {
    ordered_json object = row_to_json(row, options);
    object["images_per_s_samples"] = row.images_per_s_samples;
    object["bucket_timings"] =
        row.measured ? to_json(*row.measured)["buckets"] : ordered_json::array();
    j["rows"].push_back(object);
  }
  j["projection"] = projection ? projection_to_json(*projection) : ordered_json(nullptr);
  write_file(path, j.dump(2) + "\n");
}

}  // namespace tandem::apps::bench
