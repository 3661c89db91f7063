// bench_cifar's metric table (kMetrics): every metric survives the worker's JSON, reaches the
// report row and the terminal table, and averages over steps as documented.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "apps/bench_cifar/measurement.h"
#include "apps/bench_cifar/report.h"

namespace tandem::apps::bench {
namespace {

// A Measurement whose every metric holds a different value.
Measurement distinct_values() {
  Measurement m;
  m.device = "cuda";
  m.device_list = "cuda:0,cuda:1";
  m.memory_format = MemoryFormat::ChannelsLast;
  m.processes = 2;
  m.threads_per_process = 3;
  m.local_batch = 64;
  double value = 1.5;
  for (const Metric& metric : kMetrics) m.*metric.field = value++;
  m.buckets = {{.parameters = 3, .bytes = 4096, .ready_ms = -2, .started_ms = -1.5, .ended_ms = 1}};
  return m;
}

TEST(BenchMetrics, EveryMetricRoundTripsThroughJson) {
  const Measurement sent = distinct_values();
  const Measurement got = measurement_from_json(nlohmann::json::parse(to_json(sent).dump()));
  for (const Metric& metric : kMetrics) {
    EXPECT_EQ(got.*metric.field, sent.*metric.field) << metric.key;
  }
  EXPECT_EQ(got.device, "cuda");
  EXPECT_EQ(got.device_list, "cuda:0,cuda:1");
  EXPECT_EQ(got.memory_format, MemoryFormat::ChannelsLast);
  EXPECT_EQ(to_json(sent)["memory_format"], "channels_last");  // the JSON keeps the name
  EXPECT_EQ(got.processes, 2);
  EXPECT_EQ(got.threads_per_process, 3);
  EXPECT_EQ(got.local_batch, 64);
  ASSERT_EQ(got.buckets.size(), 1u);
  EXPECT_EQ(got.buckets[0].parameters, 3u);
  EXPECT_EQ(got.buckets[0].bytes, 4096);
  EXPECT_EQ(got.buckets[0].ready_ms, -2);
  EXPECT_EQ(got.buckets[0].started_ms, -1.5);
  EXPECT_EQ(got.buckets[0].ended_ms, 1);
}

TEST(BenchMetrics, NanTravelsAsNull) {
  Measurement m;  // no baseline row: speedup and efficiency are NaN
  m.final_loss = std::nan("");
  const nlohmann::ordered_json j = to_json(m);
  EXPECT_TRUE(j["speedup"].is_null());
  EXPECT_TRUE(j["final_loss"].is_null());
  EXPECT_TRUE(std::isnan(measurement_from_json(nlohmann::json::parse(j.dump())).final_loss));
}

TEST(BenchMetrics, KeysAreUniqueAndEveryOneReachesTheReportRow) {
  std::set<std::string> keys;
  for (const Metric& metric : kMetrics) EXPECT_TRUE(keys.insert(metric.key).second) << metric.key;
  const BenchOptions options;
  for (Mode mode : {Mode::Single, Mode::DataParallel, Mode::Distributed}) {
    const BenchRow row{.config = {.mode = mode, .devices = 2, .batch = 8},
                       .measured = distinct_values()};
    const nlohmann::ordered_json json_row = row_to_json(row, options);
    for (const Metric& metric : kMetrics) {
      if (applies(metric, mode)) {
        EXPECT_EQ(json_row.at(metric.key), row.measured.value().*metric.field) << metric.key;
      } else {
        EXPECT_TRUE(json_row.at(metric.key).is_null()) << metric.key << " on a " << mode_name(mode);
      }
    }
  }
}

TEST(BenchMetrics, StepMeansAreMeansAndHiddenIsWeightedByCommTime) {
  Measurement sums, first, second;
  first.forward_ms = 10, second.forward_ms = 20;
  first.comm_ms = 1, second.comm_ms = 3;
  first.hidden_fraction = 1, second.hidden_fraction = 0;  // 1 of 4 ms hidden
  first.images_per_s = 100;                               // not a per-step metric: left alone
  add_step(sums, first);
  add_step(sums, second);
  Measurement m;
  set_step_means(m, sums, 2);
  EXPECT_DOUBLE_EQ(m.forward_ms, 15);
  EXPECT_DOUBLE_EQ(m.comm_ms, 2);
  EXPECT_DOUBLE_EQ(m.hidden_fraction, 0.25);
  EXPECT_EQ(m.images_per_s, 0);
  Measurement no_comm;
  set_step_means(no_comm, Measurement{}, 2);
  EXPECT_EQ(no_comm.hidden_fraction, 0);  // no all-reduce: nothing hidden, not NaN
}

TEST(BenchMetrics, TheTerminalTableShowsTheMetricsWithHeadings) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  const BenchOptions options;
  const BenchRow row{.config = {.mode = Mode::Distributed, .devices = 2, .batch = 8},
                     .measured = distinct_values()};
  print_table(out, options, RunInfo{}, {row});
  std::rewind(out);
  std::string text(4096, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), out));
  std::fclose(out);
  for (const Metric& metric : kMetrics) {
    if (metric.cell != Cell::None) {
      EXPECT_NE(text.find(metric.heading), std::string::npos) << metric.key;
    }
  }
  EXPECT_NE(text.find("| 1.5 "), std::string::npos) << text;  // images/s, "%.1f"
}

}  // namespace
}  // namespace tandem::apps::bench

namespace tandem::apps::bench {
namespace {

// The UX review's busy-machine run: "ddp x2 ... eff. 1064 %" printed without a word.
TEST(BenchReport, ImpossibleEfficiencyIsWarnedAbout) {
  BenchRow busy{.config = {.mode = Mode::Distributed, .devices = 2, .overlap = Overlap::On},
                .measured = Measurement{}};
  busy.measured->efficiency = 10.64;
  BenchRow fine = busy;
  fine.measured->efficiency = 0.93;
  const BenchRow failed{.config = busy.config, .error = "it failed"};
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  print_warnings(out, RunInfo{.cpus = 2, .load_average = 6.1}, {busy, fine, failed});
  std::rewind(out);
  std::string text;
  for (int c; (c = std::fgetc(out)) != EOF;) text += static_cast<char>(c);
  std::fclose(out);
  EXPECT_EQ(text,
            "bench_cifar: warning: ddp x2 b128 overlap on shows 1064 % scaling efficiency, which "
            "no scaling gives: the machine was busy (load average 6.10 at the start on 2 CPUs); "
            "rerun it idle before trusting the ratios\n");
}

}  // namespace
}  // namespace tandem::apps::bench
