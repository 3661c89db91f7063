#pragma once
/// bench_cifar --profile: after a configuration's timed steps, as many again under the profiler
/// (apps/common/step_profiler.h), so that profiling costs the table's numbers nothing. The timed
/// steps were their warm-up. Each process writes PROFILE_DIR/<config>.rank<R>.ops.md and
/// .trace.json, e.g. "ddp_x2_b128_overlap_on.rank1.trace.json".

#include <string>
#include <vector>

#include "apps/bench_cifar/bench_options.h"
#include "apps/common/training_setup.h"
#include "data/data_loader.h"

namespace tandem::apps::bench {

/// The file names' stem for `config` on `rank`: its label with '_' for spaces, and the rank.
std::string profile_stem(const BenchConfig& config, int rank);

/// Profiles options.steps training steps of `setup` on batches from `pool`.
void profile_steps(const BenchOptions& options, const BenchConfig& config, TrainingSetup& setup,
                   const std::vector<data::Batch>& pool, int rank);

}  // namespace tandem::apps::bench
