#pragma once
/// What bench_cifar makes of a configuration measured several times (--repeats): the median of
/// each metric, the min–max of images/s, and whether they disagree enough to warn.
///
/// Note [Repeats]: run_matrix measures in rounds, every configuration once per round, rather
/// than each configuration N times in a row. A burst of load from another job then lands on one
/// sample of several rows, which the median drops, instead of on every sample of one row, which
/// would move its median and every speed-up computed from it. Three repeats is the default: the
/// fewest whose median one disturbed run cannot move, at three times the time of one.

#include <vector>

#include "apps/bench_cifar/measurement.h"

namespace tandem::apps::bench {

/// The median, smallest and largest of some samples.
struct Spread {
  double median = 0;
  double min = 0;
  double max = 0;
  /// (max - min) / median: how far apart the samples are, relative to the reported value; 0 for
  /// one sample or a median of 0.
  double relative() const;
};

/// The spread of `samples` (at least one); an even count's median is the mean of the middle two.
Spread spread_of(std::vector<double> samples);

/// The spread of a measured row's images/s: over its samples, or its one value without them.
Spread images_per_s_spread(const BenchRow& row);

/// One Measurement standing for `samples` (at least one): each metric is the median of its
/// values over the samples, so a row's metrics may come from different repeats; where it ran
/// and the buckets come from the sample whose images/s is closest to the median.
Measurement median_measurement(const std::vector<Measurement>& samples);

/// Above this relative spread of images/s (10 %), bench_cifar warns that the row's runs disagree:
/// beyond the few per cent that timers, caches and clocks vary on an idle machine.
inline constexpr double kSpreadWarning = 0.10;

}  // namespace tandem::apps::bench
