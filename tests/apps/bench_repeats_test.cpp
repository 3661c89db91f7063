// bench_cifar --repeats (apps/bench_cifar/repeats.h): medians and min–max of hand-made samples,
// the rows run_matrix builds from them, and what the table, the JSON and the warnings show.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "apps/bench_cifar/repeats.h"
#include "apps/bench_cifar/report.h"
#include "apps/bench_cifar/runner.h"
#include "tests/support/error_message.h"

namespace tandem::apps::bench {
namespace {

Measurement with_images_per_s(double images_per_s) {
  Measurement m;
  m.images_per_s = images_per_s;
  m.ms_per_step = 128 * 1000 / images_per_s;
  return m;
}

// What `print` writes to a FILE*.
template <typename Print>
std::string printed(const Print& print) {
  std::FILE* out = std::tmpfile();
  EXPECT_NE(out, nullptr);
  print(out);
  std::rewind(out);
  std::string text;
  for (int c; (c = std::fgetc(out)) != EOF;) text += static_cast<char>(c);
  std::fclose(out);
  return text;
}

TEST(BenchRepeats, SpreadIsTheMedianAndTheExtremes) {
  const Spread odd = spread_of({1260, 1180, 1234});
  EXPECT_EQ(odd.median, 1234);
  EXPECT_EQ(odd.min, 1180);
  EXPECT_EQ(odd.max, 1260);
  EXPECT_DOUBLE_EQ(odd.relative(), 80.0 / 1234);
  const Spread even = spread_of({40, 10, 20, 30});
  EXPECT_EQ(even.median, 25);  // the mean of the middle two
  EXPECT_EQ(even.min, 10);
  EXPECT_EQ(even.max, 40);
  const Spread one = spread_of({7});
  EXPECT_EQ(one.median, 7);
  EXPECT_EQ(one.relative(), 0);
  EXPECT_EQ(Spread{}.relative(), 0);  // a median of 0: no ratio, not a division by 0
  EXPECT_NE(testing::error_message([] { spread_of({}); }).find("[bench_cifar]"), std::string::npos);
}

// The UX review's three back-to-back runs of one configuration: 232, 123 and 154 images/s.
TEST(BenchRepeats, EachMetricIsItsOwnMedianAndWhereItRanComesFromTheMedianRun) {
  std::vector<Measurement> samples{with_images_per_s(232), with_images_per_s(123),
                                   with_images_per_s(154)};
  samples[0].forward_ms = 9, samples[1].forward_ms = 30, samples[2].forward_ms = 11;
  samples[0].threads_per_process = 1, samples[1].threads_per_process = 2;
  samples[2].threads_per_process = 3;
  samples[2].buckets = {{.parameters = 5}};
  samples[1].speedup = 2;  // NaN elsewhere: the NaNs are left out, not sorted
  const Measurement m = median_measurement(samples);
  EXPECT_EQ(m.images_per_s, 154);
  EXPECT_DOUBLE_EQ(m.ms_per_step, 128 * 1000 / 154.0);
  EXPECT_EQ(m.forward_ms, 11);
  EXPECT_EQ(m.speedup, 2);
  EXPECT_TRUE(std::isnan(m.efficiency));  // NaN in every sample
  EXPECT_EQ(m.threads_per_process, 3);    // the 154 images/s run's
  ASSERT_EQ(m.buckets.size(), 1u);
  EXPECT_EQ(m.buckets[0].parameters, 5u);
}

TEST(BenchRepeats, RowsHoldTheMediansAndEveryRepeatAndScaleFromTheMedians) {
  std::vector<BenchRow> rows{{.config = {.mode = Mode::Single, .devices = 1, .batch = 64}},
                             {.config = {.mode = Mode::DataParallel, .devices = 2, .batch = 64}},
                             {.config = {.mode = Mode::Distributed, .devices = 2, .batch = 64},
                              .error = "[bench_cifar] failed in its second repeat"}};
  combine_repeats(rows, {{with_images_per_s(100), with_images_per_s(40), with_images_per_s(110)},
                         {with_images_per_s(150), with_images_per_s(160), with_images_per_s(170)},
                         {with_images_per_s(90)}});
  add_scaling(rows);
  ASSERT_TRUE(rows[0].measured.has_value());
  EXPECT_EQ(rows[0].measured->images_per_s, 100);
  EXPECT_EQ(rows[0].images_per_s_samples, (std::vector<double>{100, 40, 110}));  // in run order
  // 160 / 100: the one disturbed single run (40) moves neither median.
  EXPECT_DOUBLE_EQ(rows[1].measured->speedup, 1.6);
  EXPECT_DOUBLE_EQ(rows[1].measured->efficiency, 0.8);
  EXPECT_FALSE(rows[2].measured.has_value());  // a repeat failed: the row failed
  EXPECT_TRUE(rows[2].images_per_s_samples.empty());
  const Spread spread = images_per_s_spread(rows[0]);
  EXPECT_EQ(spread.min, 40);
  EXPECT_EQ(spread.max, 110);
}

BenchRow repeated_row(std::vector<double> samples) {
  BenchRow row{.config = {.mode = Mode::Single, .devices = 1, .batch = 128}};
  std::vector<Measurement> measured;
  for (double value : samples) measured.push_back(with_images_per_s(value));
  std::vector<BenchRow> rows{row};
  combine_repeats(rows, {measured});
  return rows[0];
}

std::string table_line(const std::string& text, const std::string& start) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(start, 0) == 0) return line;
  }
  return "";
}

TEST(BenchRepeats, TheTableShowsTheMedianAndTheMinMax) {
  BenchOptions options;
  const BenchRow repeated = repeated_row({1260.2, 1180.4, 1234.5});
  const BenchRow once = repeated_row({1000});
  const std::string text = printed([&](std::FILE* out) {
    print_table(out, options, RunInfo{}, {repeated, once});
  });
  EXPECT_NE(text.find("median of 3 repeats"), std::string::npos) << text;
  const std::string header = table_line(text, "| config");
  const std::string with_spread = table_line(text, "| single x1 b128 ");
  EXPECT_NE(with_spread.find("| 1234.5 (1180–1260) |"), std::string::npos) << text;
  const std::string plain = table_line(text.substr(text.find(with_spread) + 1), "| single");
  EXPECT_NE(plain.find("| 1000.0 "), std::string::npos) << text;  // one run: no spread
  // The en dash is three bytes but one column: the rows' bars line up with the header's.
  const auto bars = [](const std::string& line) {
    std::vector<size_t> columns;
    size_t column = 0;
    for (char c : line) {
      if ((static_cast<unsigned char>(c) & 0xC0) == 0x80) continue;
      if (c == '|') columns.push_back(column);
      ++column;
    }
    return columns;
  };
  EXPECT_EQ(bars(with_spread), bars(header)) << text;
  EXPECT_EQ(bars(plain), bars(header)) << text;
}

TEST(BenchRepeats, TheJsonRowHasTheRepeatsAndTheirMinMax) {
  BenchOptions options;
  const nlohmann::ordered_json row = row_to_json(repeated_row({100, 120, 90}), options);
  EXPECT_EQ(row["images_per_s"], 100.0);  // the existing key: the median
  EXPECT_EQ(row["repeats"], 3);
  EXPECT_EQ(row["images_per_s_min"], 90.0);
  EXPECT_EQ(row["images_per_s_max"], 120.0);
  const nlohmann::ordered_json failed =
      row_to_json(BenchRow{.config = {}, .error = "[bench_cifar] no"}, options);
  EXPECT_TRUE(failed["repeats"].is_null());
  EXPECT_TRUE(failed["images_per_s_min"].is_null());
}

TEST(BenchRepeats, RepeatsThatDisagreeAreWarnedAbout) {
  const BenchRow busy = repeated_row({232, 123, 154});
  const BenchRow steady = repeated_row({150, 155, 160});  // 6.5 %: an idle machine's noise
  const BenchRow once = repeated_row({40});
  const std::string text = printed([&](std::FILE* out) {
    print_warnings(out, RunInfo{.cpus = 2, .load_average = 3.5}, {busy, steady, once});
  });
  EXPECT_EQ(text,
            "bench_cifar: warning: single x1 b128 varied by 71 % over its 3 repeats (123–232 "
            "images/s; load average 3.50 at the start on 2 CPUs): a busy machine or too few "
            "--steps, so its median is a rough guess\n");
}

}  // namespace
}  // namespace tandem::apps::bench
