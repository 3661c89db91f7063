// The JSON output of bench_cifar (apps/bench_cifar/report.h).
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <thread>

#include "apps/bench_cifar/report.h"
#include "engine/backend.h"
#include "engine/error.h"

namespace tandem::apps::bench {
namespace {

using nlohmann::ordered_json;

// A key of a JSON row that is not a metric, and how to read it.
struct Column {
  const char* key;
  std::function<ordered_json(const BenchRow&, const BenchOptions&)> value;
};

// null instead of an empty string: the field does not apply to the row.
ordered_json text_or_null(const std::string& text) {
  return text.empty() ? ordered_json(nullptr) : ordered_json(text);
}

// The configuration and where it ran, before the metrics.
const std::vector<Column>& leading_columns() {
  using O = BenchOptions;
  const auto measured = [](const char* key, auto get) {
    return Column{key, [get](const BenchRow& row, const O&) {
                    return row.measured ? ordered_json(get(*row.measured)) : ordered_json(nullptr);
                  }};
  };
  static const std::vector<Column> all = {
      {"mode", [](const BenchRow& r, const O&) { return mode_name(r.config.mode); }},
      {"devices", [](const BenchRow& r, const O&) { return r.config.devices; }},
      {"batch_size", [](const BenchRow& r, const O&) { return r.config.batch; }},
      {"overlap", [](const BenchRow& r, const O&) { return text_or_null(r.config.overlap); }},
      {"grad_compression",
       [](const BenchRow& r, const O&) { return text_or_null(r.config.compression); }},
      {"dp_replicas",
       [](const BenchRow& r, const O&) { return text_or_null(r.config.dp_replicas); }},
      {"bucket_cap_mb",
       [](const BenchRow& r, const O& o) {
         return r.config.mode == Mode::Distributed ? ordered_json(o.bucket_cap_mb)
                                                   : ordered_json(nullptr);
       }},
      measured("device", [](const Measurement& m) { return m.device; }),
      measured("device_list", [](const Measurement& m) { return m.device_list; }),
      measured("memory_format", [](const Measurement& m) { return m.memory_format; }),
      measured("processes", [](const Measurement& m) { return m.processes; }),
      measured("threads_per_process", [](const Measurement& m) { return m.threads_per_process; }),
      measured("local_batch", [](const Measurement& m) { return m.local_batch; }),
  };
  return all;
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
          {"batch_sizes", o.batch_sizes},
          {"arch", o.arch},
          {"warmup", o.warmup},
          {"steps", o.steps},
          {"threads", o.threads},
          {"bucket_cap_mb", o.bucket_cap_mb},
          {"first_bucket_mb", o.first_bucket_mb},
          {"overlap", o.overlap},
          {"grad_compression", o.compressions},
          {"dp_replicas", o.dp_replicas},
          {"data", o.real ? o.data_dir : "synthetic"},
          {"seed", o.seed}};
}

}  // namespace

RunInfo current_run_info(const BenchOptions& options) {
  RunInfo info{.cpu = "unknown CPU",
               .cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())),
               .threads = total_threads(options),
               .cuda = cuda_available()};
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M", &local);
  info.date = date;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    const size_t colon = line.find(':');
    if (line.rfind("model name", 0) == 0 && colon != std::string::npos &&
        colon + 2 <= line.size()) {
      info.cpu = line.substr(colon + 2);
      break;
    }
  }
  return info;
}

std::vector<std::string> row_columns() {
  std::vector<std::string> keys;
  for (const Column& column : leading_columns()) keys.emplace_back(column.key);
  for (const Metric& metric : kMetrics) keys.emplace_back(metric.key);
  keys.insert(keys.end(), {"buckets", "error"});
  return keys;
}

ordered_json row_to_json(const BenchRow& row, const BenchOptions& options) {
  ordered_json object = ordered_json::object();
  for (const Column& column : leading_columns()) object[column.key] = column.value(row, options);
  const bool ddp = row.config.mode == Mode::Distributed;
  for (const Metric& metric : kMetrics) {
    object[metric.key] = row.measured && applies(metric, row.config.mode)
                             ? metric_json(row.measured.value().*metric.field)
                             : ordered_json(nullptr);
  }
  object["buckets"] =
      row.measured && ddp ? ordered_json(row.measured->buckets.size()) : ordered_json(nullptr);
  object["error"] = text_or_null(row.error);
  return object;
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

void write_json(const std::string& path, const BenchOptions& options, const RunInfo& info,
                const std::vector<BenchRow>& rows,
                const std::optional<ProjectionReport>& projection) {
  ordered_json j = {{"benchmark", "bench_cifar"},
                    {"date", info.date},
                    {"machine", {{"cpu", info.cpu}, {"cpus", info.cpus}, {"cuda", info.cuda}}},
                    {"threads", info.threads},
                    {"options", options_to_json(options)},
                    {"rows", ordered_json::array()}};
  for (const BenchRow& row : rows) {
    ordered_json object = row_to_json(row, options);
    object["bucket_timings"] =
        row.measured ? to_json(*row.measured)["buckets"] : ordered_json::array();
    j["rows"].push_back(object);
  }
  j["projection"] = projection ? projection_to_json(*projection) : ordered_json(nullptr);
  write_file(path, j.dump(2) + "\n");
}

}  // namespace tandem::apps::bench
