#pragma once
/// --project: measures the one-device profiles that the scaling projection needs and projects
/// DDP and DataParallel onto --project-gpus GPUs over each --link (apps/bench_cifar/projection.h).
///
/// Note [Projection profiles]: the global batch stays fixed, so on n GPUs each computes batch/n.
/// Compute does not scale linearly with the batch (small batches use a device less well), so
/// every per-GPU batch is measured: a DDP world-size-1 run at that batch with the chosen buckets
/// gives forward, backward and optimizer time and when each bucket's gradients were ready. Its
/// backward time has the end-of-backward wait (the world-size-1 "all-reduce") taken out.

#include <string>
#include <vector>

#include "apps/bench_cifar/measurement.h"
#include "apps/bench_cifar/projection.h"
#include "apps/bench_cifar/runner.h"

namespace tandem::apps::bench {

struct ProjectionRow {
  std::string link;
  ProjectedStep step;
};

struct ProjectionReport {
  std::string compute_device;  ///< where the profiles were measured, e.g. "cpu (2 threads)"
  std::vector<LinkModel> links;
  std::vector<ComputeProfile> profiles;  ///< by per-GPU batch
  std::vector<ProjectionRow> rows;
  std::vector<std::string> notes;  ///< what could not be projected, and why
};

/// The links --link names, with their bandwidths and latency.
std::vector<LinkModel> links_of(const BenchOptions& options);

/// The projection profile of a DDP world-size-1 measurement (Note [Projection profiles]).
ComputeProfile profile_of(const Measurement& measured, int64_t batch);

/// A note (a warning) when a projected row's efficiency is over 100 % (the rows of a per-GPU batch
/// that computes faster per image than the whole batch on one GPU), naming the highest; "" when
/// none is: such a row is not a real speed-up but the profiles' non-linearity.
std::string superlinear_note(const std::vector<ProjectionRow>& rows);

/// Measures the profiles (reusing matching ddp x1 rows of `measured`) and projects every batch
/// size onto every GPU count over every link.
ProjectionReport build_projection(const BenchOptions& options,
                                  const std::vector<BenchRow>& measured, WorkArea& area);

}  // namespace tandem::apps::bench
