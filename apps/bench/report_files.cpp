// CSV and JSON outputs of bench_cifar (apps/bench/report.h).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>

#include "apps/bench/host.h"
#include "apps/bench/report.h"
#include "engine/backend.h"
#include "engine/error.h"

namespace tandem::apps::bench {
namespace {

using nlohmann::ordered_json;

struct Column {
  const char* key;
  std::function<ordered_json(const BenchRow&, const BenchOptions&)> value;
};

// A column read from the row's configuration (never null).
template <typename Get>
Column from_config(const char* key, Get get) {
  return {key, [get](const BenchRow& row, const BenchOptions& options) -> ordered_json {
            return get(row.config, options);
          }};
}

// A column read from the measurement: null where the row failed or, with only_mode, on rows of
// the other modes (a DataParallel row has no all-reduce time).
template <typename Get>
Column from_measured(const char* key, Get get, const char* only_mode = nullptr) {
  return {key, [get, only_mode](const BenchRow& row, const BenchOptions&) -> ordered_json {
            if (!row.measured || (only_mode && row.config.mode != only_mode)) return nullptr;
            return get(*row.measured);
          }};
}

Column measured(const char* key, double Measurement::*field, const char* only_mode = nullptr) {
  return from_measured(
      key, [field](const Measurement& m) { return m.*field; }, only_mode);
}

ordered_json optional_number(const std::optional<double>& value) {
  return value ? ordered_json(*value) : ordered_json(nullptr);
}

const std::vector<Column>& columns() {
  using M = Measurement;
  using O = BenchOptions;
  static const std::vector<Column> all = {
      from_config("mode", [](const BenchConfig& c, const O&) { return c.mode; }),
      from_config("devices", [](const BenchConfig& c, const O&) { return c.devices; }),
      from_config("batch_size", [](const BenchConfig& c, const O&) { return c.batch; }),
      from_config("overlap",
                  [](const BenchConfig& c, const O&) {
                    return c.overlap.empty() ? ordered_json(nullptr) : ordered_json(c.overlap);
                  }),
      from_config("grad_compression",
                  [](const BenchConfig& c, const O&) {
                    return c.compression.empty() ? ordered_json(nullptr)
                                                 : ordered_json(c.compression);
                  }),
      from_config("bucket_cap_mb",
                  [](const BenchConfig& c, const O& o) {
                    return c.mode == "ddp" ? ordered_json(o.bucket_cap_mb) : ordered_json(nullptr);
                  }),
      from_measured("device", [](const M& m) { return m.device; }),
      from_measured("device_list", [](const M& m) { return m.device_list; }),
      from_measured("memory_format", [](const M& m) { return m.memory_format; }),
      from_measured("processes", [](const M& m) { return m.processes; }),
      from_measured("threads_per_process", [](const M& m) { return m.threads_per_process; }),
      from_measured("local_batch", [](const M& m) { return m.local_batch; }),
      measured("images_per_s", &M::images_per_s),
      measured("ms_per_step", &M::ms_per_step),
      {"speedup", [](const BenchRow& r, const O&) { return optional_number(r.speedup); }},
      {"efficiency", [](const BenchRow& r, const O&) { return optional_number(r.efficiency); }},
      measured("forward_ms", &M::forward_ms),
      measured("backward_ms", &M::backward_ms),
      measured("optimizer_ms", &M::optimizer_ms),
      measured("comm_ms", &M::comm_ms, "ddp"),
      measured("hidden_fraction", &M::hidden_fraction, "ddp"),
      measured("wait_ms", &M::wait_ms, "ddp"),
      measured("grad_bytes_per_step", &M::grad_bytes_per_step, "ddp"),
      from_measured(
          "buckets", [](const M& m) { return m.buckets.size(); }, "ddp"),
      measured("scatter_ms", &M::scatter_ms, "dp"),
      measured("replicate_ms", &M::replicate_ms, "dp"),
      measured("apply_ms", &M::apply_ms, "dp"),
      measured("gather_ms", &M::gather_ms, "dp"),
      measured("reduce_ms", &M::reduce_ms, "dp"),
      measured("peak_rss_mb", &M::peak_rss_mb),
      measured("parameter_bytes", &M::parameter_bytes),
      measured("final_loss", &M::final_loss),
      {"error",
       [](const BenchRow& r, const O&) {
         return r.error.empty() ? ordered_json(nullptr) : ordered_json(r.error);
       }},
  };
  return all;
}

// RFC 4180: quote a field holding a comma, quote or line break; double its quotes.
std::string csv_field(const ordered_json& value) {
  if (value.is_null()) return "";
  if (!value.is_string()) {
    if (!value.is_number_float()) return value.dump();
    if (!std::isfinite(value.get<double>())) return "";  // as JSON, which writes NaN as null
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", value.get<double>());
    return text;
  }
  std::string text = value.get<std::string>();
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  TANDEM_CHECK(out.good(), "[bench_cifar] cannot write ", path);
}

ordered_json options_to_json(const BenchOptions& o) {
  return {{"modes", o.modes},
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
          {"data", o.real ? o.data_dir : "synthetic"},
          {"seed", o.seed}};
}

}  // namespace

RunInfo current_run_info(const BenchOptions& options) {
  return {.date = local_date_time(),
          .cpu = cpu_model(),
          .cpus = cpu_count(),
          .threads = total_threads(options),
          .cuda = cuda_available()};
}

std::vector<std::string> row_columns() {
  std::vector<std::string> keys;
  for (const Column& column : columns()) keys.emplace_back(column.key);
  return keys;
}

ordered_json row_to_json(const BenchRow& row, const BenchOptions& options) {
  ordered_json object = ordered_json::object();
  for (const Column& column : columns()) object[column.key] = column.value(row, options);
  return object;
}

void write_csv(const std::string& path, const BenchOptions& options,
               const std::vector<BenchRow>& rows) {
  // Appends only: GCC 12 warns falsely (-Wrestrict) about "," + std::string.
  std::string text;
  for (const Column& column : columns()) {
    if (!text.empty()) text += ',';
    text += column.key;
  }
  text += '\n';
  for (const BenchRow& row : rows) {
    bool first = true;
    for (const Column& column : columns()) {
      if (!first) text += ',';
      text += csv_field(column.value(row, options));
      first = false;
    }
    text += '\n';
  }
  write_file(path, text);
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
                         {"mode", s.mode},
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
