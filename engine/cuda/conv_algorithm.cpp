#include "engine/cuda/conv_algorithm.h"

#include <algorithm>

namespace tandem::cuda {
namespace {

bool qualifies(const ConvAlgoPerf& p, const ConvAlgoOptions& options) {
  if (!p.succeeded) return false;
  if (!options.allow_tf32 && !p.fma_math) return false;  // Note [TF32]
  if (p.workspace > options.max_workspace) return false;
  return !options.deterministic || p.deterministic;
}

}  // namespace

std::vector<ConvAlgoChoice> rank_algorithms(const ConvAlgoPerf* perf, int count,
                                            const ConvAlgoOptions& options) {
  std::vector<ConvAlgoChoice> ranked;
  for (int i = 0; i < count; ++i) {
    const ConvAlgoPerf& p = perf[i];
    if (!qualifies(p, options)) continue;
    // cuDNN may list an algorithm twice (another math type): the first is the faster.
    const auto same = [&](const ConvAlgoChoice& c) { return c.algo == p.algo; };
    if (std::none_of(ranked.begin(), ranked.end(), same)) {
      ranked.push_back({p.algo, p.workspace, p.math});
    }
  }
  const ConvAlgoChoice& fallback =
      options.deterministic ? options.deterministic_fallback : options.fallback;
  const auto same = [&](const ConvAlgoChoice& c) { return c.algo == fallback.algo; };
  if (std::none_of(ranked.begin(), ranked.end(), same)) ranked.push_back(fallback);
  return ranked;
}

ConvAlgoChoice pick_algorithm(const ConvAlgoPerf* perf, int count, const ConvAlgoOptions& options) {
  return rank_algorithms(perf, count, options).front();
}

bool environment_flag(const char* value) {
  return value != nullptr && value[0] != '\0' && value[0] != '0';
}

}  // namespace tandem::cuda
