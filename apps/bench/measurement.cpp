#include "apps/bench/measurement.h"

#include <cmath>

namespace tandem::apps::bench {

using nlohmann::json;
using nlohmann::ordered_json;

ordered_json to_json(const Measurement& m) {
  ordered_json buckets = ordered_json::array();
  for (const BucketStat& b : m.buckets) {
    buckets.push_back({{"parameters", b.parameters},
                       {"bytes", b.bytes},
                       {"ready_ms", b.ready_ms},
                       {"started_ms", b.started_ms},
                       {"ended_ms", b.ended_ms}});
  }
  return {{"device", m.device},
          {"device_list", m.device_list},
          {"memory_format", m.memory_format},
          {"processes", m.processes},
          {"threads_per_process", m.threads_per_process},
          {"local_batch", m.local_batch},
          {"images_per_s", m.images_per_s},
          {"ms_per_step", m.ms_per_step},
          {"forward_ms", m.forward_ms},
          {"backward_ms", m.backward_ms},
          {"optimizer_ms", m.optimizer_ms},
          {"scatter_ms", m.scatter_ms},
          {"replicate_ms", m.replicate_ms},
          {"apply_ms", m.apply_ms},
          {"gather_ms", m.gather_ms},
          {"reduce_ms", m.reduce_ms},
          {"comm_ms", m.comm_ms},
          {"hidden_fraction", m.hidden_fraction},
          {"wait_ms", m.wait_ms},
          {"grad_bytes_per_step", m.grad_bytes_per_step},
          {"buckets", buckets},
          {"peak_rss_mb", m.peak_rss_mb},
          {"parameter_bytes", m.parameter_bytes},
          {"final_loss", m.final_loss}};
}

Measurement measurement_from_json(const json& j) {
  Measurement m;
  m.device = j.at("device").get<std::string>();
  m.device_list = j.at("device_list").get<std::string>();
  m.memory_format = j.at("memory_format").get<std::string>();
  m.processes = j.at("processes").get<int>();
  m.threads_per_process = j.at("threads_per_process").get<int>();
  m.local_batch = j.at("local_batch").get<int64_t>();
  for (auto [key, field] : {std::pair{"images_per_s", &m.images_per_s},
                            {"ms_per_step", &m.ms_per_step},
                            {"forward_ms", &m.forward_ms},
                            {"backward_ms", &m.backward_ms},
                            {"optimizer_ms", &m.optimizer_ms},
                            {"scatter_ms", &m.scatter_ms},
                            {"replicate_ms", &m.replicate_ms},
                            {"apply_ms", &m.apply_ms},
                            {"gather_ms", &m.gather_ms},
                            {"reduce_ms", &m.reduce_ms},
                            {"comm_ms", &m.comm_ms},
                            {"hidden_fraction", &m.hidden_fraction},
                            {"wait_ms", &m.wait_ms},
                            {"grad_bytes_per_step", &m.grad_bytes_per_step},
                            {"peak_rss_mb", &m.peak_rss_mb},
                            {"parameter_bytes", &m.parameter_bytes},
                            {"final_loss", &m.final_loss}}) {
    // JSON has no NaN: a diverged loss comes back as null.
    *field = j.at(key).is_null() ? std::nan("") : j.at(key).get<double>();
  }
  for (const json& b : j.at("buckets")) {
    m.buckets.push_back({.parameters = b.at("parameters").get<size_t>(),
                         .bytes = b.at("bytes").get<double>(),
                         .ready_ms = b.at("ready_ms").get<double>(),
                         .started_ms = b.at("started_ms").get<double>(),
                         .ended_ms = b.at("ended_ms").get<double>()});
  }
  return m;
}

}  // namespace tandem::apps::bench
