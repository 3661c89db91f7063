#include "apps/common/busy_cores.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <system_error>

namespace tandem::apps {

// The whole first token must be the number ("5.26x" is not 5.26), finite and not negative.
std::optional<double> read_load_average(const std::string& loadavg_path) {
  std::ifstream file(loadavg_path);
  std::string token;
  if (!(file >> token) || token.size() > 32) return std::nullopt;
  double load = 0;
  const auto [end, error] = std::from_chars(token.data(), token.data() + token.size(), load);
  if (error != std::errc() || end != token.data() + token.size()) return std::nullopt;
  if (!std::isfinite(load) || load < 0) return std::nullopt;
  return load;
}

std::string bf16_on_busy_cores_warning(const std::string& program, nn::Precision precision,
                                       int threads, double load, int cores) {
  if (precision != nn::Precision::BFloat16 || threads < 2 || load < cores) return "";
  char figures[64];
  std::snprintf(figures, sizeof figures, "load %.1f on %d core%s", load, cores,
                cores == 1 ? "" : "s");
  return program + ": warning: other work keeps the cores busy (" + figures + "): bf16 on " +
         std::to_string(threads) +
         " threads then slows far more than fp32, its threads waiting for each other "
         "(docs/benchmarks.md, \"bf16 on a busy machine\"); --threads 1 keeps it near fp32";
}

}  // namespace tandem::apps
