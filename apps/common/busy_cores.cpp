#include "apps/common/busy_cores.h"

#include <cstdio>
#include <fstream>

namespace tandem::apps {

std::optional<double> read_load_average(const std::string& loadavg_path) {
  std::ifstream file(loadavg_path);
  double load = 0;
  if (!(file >> load) || load < 0) return std::nullopt;
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
