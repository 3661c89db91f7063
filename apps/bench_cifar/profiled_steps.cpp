#include "apps/bench_cifar/profiled_steps.h"

#include <algorithm>

#include "apps/common/step_profiler.h"
#include "engine/tandem.h"

namespace tandem::apps::bench {

std::string profile_stem(const BenchConfig& config, int rank) {
  std::string stem = config.label();
  std::replace(stem.begin(), stem.end(), ' ', '_');
  return stem + ".rank" + std::to_string(rank);
}

void profile_steps(const BenchOptions& o, const BenchConfig& config, TrainingSetup& s,
                   const std::vector<data::Batch>& pool, int rank) {
  StepProfiler profile(
      {.wait = 0,
       .steps = o.steps,
       .dir = o.profile_dir,
       .stem = profile_stem(config, rank),
       .process = "bench_cifar " + config.label() + " rank " + std::to_string(rank),
       .print = false,
       .gpu = s.device().is_cuda(),
       .synchronize =
           [&s] {
             for (const Device& d : s.devices) runtime_for(d).synchronize(d);
           },
       .program = "bench_cifar"});
  for (int i = 0; i < o.steps; ++i) {
    const data::Batch& batch = pool[static_cast<size_t>(i) % pool.size()];
    profile.begin_step();
    s.stepper().zero_grad();
    cross_entropy(s.model->forward(batch.images), batch.labels).backward();
    s.stepper().step();
    profile.end_step();
  }
}

}  // namespace tandem::apps::bench
