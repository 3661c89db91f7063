#pragma once
/// The machine's limit that bench_cifar's "% of peak" is measured against: how fast one large
/// convolution runs here, through the same op and kernels as training (oneDNN on CPUs).
///
/// Note [Convolution peak]: a ResNet step is mostly convolutions (Note [Counting FLOPs] in
/// nn/flop_count.h), so the rate of a convolution large enough to keep every core's vector units
/// busy is the most a step can reach: a 3×3 convolution, 128 channels in and out on 28×28 maps,
/// batch 32, channels-last (7.4 GFLOP forward, 25 MiB of data), forward only, with all of the
/// run's threads (of five such shapes timed on an Intel Xeon with AMX, 2026-11-27, through
/// PyTorch 2.15's oneDNN, the fastest in float32 and in bfloat16). It is timed call by call for
/// about half a second, and the fastest call counts: on a shared machine the fastest is the one
/// least disturbed. Once per run, before the matrix, in float32 and, where bf16 rows run and the
/// CPU computes bfloat16 natively (AVX512-BF16 or AMX, engine/cpu_features.h), in bfloat16. CPUs
/// only: on GPUs the rows show GFLOP/s without a share.

#include <optional>
#include <string>
#include <vector>

#include "apps/bench_cifar/measurement.h"
#include "nn/precision.h"

namespace tandem::apps::bench {

struct ConvPeak {
  std::string convolution;  ///< what was timed, e.g. "3x3 conv, N32 128->128 28x28 nhwc"
  int threads = 0;
  double float32_gflops = 0;
  std::optional<double> bfloat16_gflops{};  ///< nullopt: not measured (bfloat16_note says why)
  std::string bfloat16_note{};
};

/// Measures the peak with `threads` threads; bfloat16 too when `bfloat16` and the CPU computes it
/// natively. Takes about a second (two with bfloat16).
ConvPeak measure_conv_peak(int threads, bool bfloat16);

/// The peak for rows of `precision`, or nullopt where there is none.
std::optional<double> peak_gflops(const ConvPeak& peak, nn::Precision precision);

/// Sets each measured row's peak_fraction: its GFLOP/s over the peak of its precision.
void add_peak_fractions(std::vector<BenchRow>& rows, const ConvPeak& peak);

}  // namespace tandem::apps::bench
