#include "apps/bench_cifar/conv_peak.h"

#include <algorithm>
#include <chrono>

#include "engine/cpu_features.h"
#include "engine/elapsed.h"
#include "engine/tandem.h"

namespace tandem::apps::bench {
namespace {

// Note [Convolution peak]
constexpr int64_t kBatch = 32, kChannels = 128, kSide = 28;
constexpr double kSecondsPerPrecision = 0.5;
constexpr int kMinCalls = 3;

double forward_flops() {
  return 2.0 * kBatch * kChannels * kChannels * 9 * kSide * kSide;
}

// The fastest of the timed calls, as GFLOP/s.
double fastest_gflops(DType dtype) {
  Generator generator(0);
  const TensorOptions channels_last{.memory_format = MemoryFormat::ChannelsLast};
  const Tensor x = randn({kBatch, kChannels, kSide, kSide}, generator, channels_last).to(dtype);
  const Tensor w = randn({kChannels, kChannels, 3, 3}, generator, channels_last).to(dtype);
  NoGradGuard no_grad;
  const auto call = [&] { return conv2d(x, w, Tensor(), {.stride = 1, .padding = 1}); };
  call();  // creates and caches the primitive
  double best_ms = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int calls = 0; calls < kMinCalls || seconds_since(start) < kSecondsPerPrecision; ++calls) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    const double ms = milliseconds_since(t0);
    best_ms = calls == 0 ? ms : std::min(best_ms, ms);
  }
  return forward_flops() / (best_ms * 1e6);
}

}  // namespace

ConvPeak measure_conv_peak(int threads, bool bfloat16) {
  ThreadCountGuard guard(threads);
  ConvPeak peak{.convolution = "3x3 conv, N" + std::to_string(kBatch) + " " +
                               std::to_string(kChannels) + "->" + std::to_string(kChannels) + " " +
                               std::to_string(kSide) + "x" + std::to_string(kSide) + " nhwc",
                .threads = threads};
  peak.float32_gflops = fastest_gflops(DType::Float32);
  if (!bfloat16) return peak;
  if (cpu_has_native_bf16()) {
    peak.bfloat16_gflops = fastest_gflops(DType::BFloat16);
  } else {
    peak.bfloat16_note = "not measured: this CPU has no bfloat16 instructions (" +
                         cpu_kernel_isa() + "), so bf16 rows have no peak";
  }
  return peak;
}

std::optional<double> peak_gflops(const ConvPeak& peak, nn::Precision precision) {
  if (precision == nn::Precision::BFloat16) return peak.bfloat16_gflops;
  return peak.float32_gflops;
}

void add_peak_fractions(std::vector<BenchRow>& rows, const ConvPeak& peak) {
  for (BenchRow& row : rows) {
    const std::optional<double> gflops = peak_gflops(peak, row.config.precision);
    if (row.measured && gflops && *gflops > 0) {
      row.measured->peak_fraction = row.measured->gflop_per_s / *gflops;
    }
  }
}

}  // namespace tandem::apps::bench
