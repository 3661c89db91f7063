#include "apps/bench_cifar/repeats.h"

#include <algorithm>
#include <cmath>

#include "engine/error.h"

namespace tandem::apps::bench {

double Spread::relative() const {
  return median > 0 ? (max - min) / median : 0;
}

Spread spread_of(std::vector<double> samples) {
  TANDEM_CHECK(!samples.empty(), "[bench_cifar] the spread of no samples");
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  const double median = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  return {.median = median, .min = samples.front(), .max = samples.back()};
}

Spread images_per_s_spread(const BenchRow& row) {
  TANDEM_CHECK(row.measured.has_value(), "[bench_cifar] the spread of a failed row");
  if (row.images_per_s_samples.empty()) return spread_of({row.measured->images_per_s});
  return spread_of(row.images_per_s_samples);
}

Measurement median_measurement(const std::vector<Measurement>& samples) {
  TANDEM_CHECK(!samples.empty(), "[bench_cifar] the median of no measurements");
  std::vector<double> images_per_s;
  images_per_s.reserve(samples.size());
  for (const Measurement& m : samples) images_per_s.push_back(m.images_per_s);
  const double median = spread_of(images_per_s).median;
  const auto closest =
      std::min_element(samples.begin(), samples.end(), [&](const auto& a, const auto& b) {
        return std::abs(a.images_per_s - median) < std::abs(b.images_per_s - median);
      });
  Measurement result = *closest;
  for (const Metric& metric : kMetrics) {
    std::vector<double> values;
    values.reserve(samples.size());
    for (const Measurement& m : samples) {
      // NaN (speed-up before add_scaling) stays NaN rather than sorting anywhere.
      if (!std::isnan(m.*metric.field)) values.push_back(m.*metric.field);
    }
    result.*metric.field = values.empty() ? std::nan("") : spread_of(values).median;
  }
  return result;
}

}  // namespace tandem::apps::bench
