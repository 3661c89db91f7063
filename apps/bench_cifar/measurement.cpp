#include "apps/bench_cifar/measurement.h"

#include <cmath>

namespace tandem::apps::bench {

// Reads a worker's buckets; written in to_json, whose ordered_json this macro does not serve.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(BucketStat, parameters, bytes, ready_ms, started_ms, ended_ms)

using nlohmann::json;
using nlohmann::ordered_json;

void add_step(Measurement& sums, const Measurement& step) {
  for (const Metric& metric : kMetrics) {
    if (metric.mean == Mean::Once) continue;
    sums.*metric.field += step.*metric.field * (metric.mean == Mean::CommShare ? step.comm_ms : 1);
  }
}

void set_step_means(Measurement& m, const Measurement& sums, int steps) {
  for (const Metric& metric : kMetrics) {
    if (metric.mean == Mean::Once) continue;
    const double count = metric.mean == Mean::CommShare ? sums.comm_ms : steps;
    m.*metric.field = count > 0 ? sums.*metric.field / count : 0;
  }
}

ordered_json metric_json(double value) {
  return std::isnan(value) ? ordered_json(nullptr) : ordered_json(value);
}

ordered_json where_json(const Measurement& m) {
  return {{"device", m.device},
          {"device_list", m.device_list},
          {"memory_format", memory_format_name(m.memory_format)},
          {"processes", m.processes},
          {"threads_per_process", m.threads_per_process},
          {"local_batch", m.local_batch}};
}

ordered_json to_json(const Measurement& m) {
  ordered_json j = where_json(m);
  for (const Metric& metric : kMetrics) j[metric.key] = metric_json(m.*metric.field);
  j["buckets"] = ordered_json::array();
  for (const BucketStat& b : m.buckets) {
    j["buckets"].push_back({{"parameters", b.parameters},
                            {"bytes", b.bytes},
                            {"ready_ms", b.ready_ms},
                            {"started_ms", b.started_ms},
                            {"ended_ms", b.ended_ms}});
  }
  return j;
}

Measurement measurement_from_json(const json& j) {
  Measurement m;
  m.device = j.at("device").get<std::string>();
  m.device_list = j.at("device_list").get<std::string>();
  m.memory_format = parse_memory_format(j.at("memory_format").get<std::string>());
  m.processes = j.at("processes").get<int>();
  m.threads_per_process = j.at("threads_per_process").get<int>();
  m.local_batch = j.at("local_batch").get<int64_t>();
  for (const Metric& metric : kMetrics) {
    const json& value = j.at(metric.key);
    m.*metric.field = value.is_null() ? std::nan("") : value.get<double>();
  }
  m.buckets = j.at("buckets").get<std::vector<BucketStat>>();
  return m;
}

}  // namespace tandem::apps::bench
