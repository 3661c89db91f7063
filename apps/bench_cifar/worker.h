#pragma once
/// The measuring side of bench_cifar: one configuration in one process (single, dp) or in each of
/// the ranks of a job (ddp), started by the parent through parallel::launch with --worker-json.
///
/// Note [One process per configuration]: every configuration runs in fresh processes, so that
/// its peak RSS (getrusage) is its own and not the largest of everything run before it, a crash
/// takes down one row rather than the whole matrix, and thread settings do not leak between rows.

#include <string>

#include "apps/bench_cifar/bench_options.h"
#include "apps/bench_cifar/measurement.h"

namespace tandem::apps::bench {

/// Measures worker_config(options) and writes the Measurement as JSON to options.worker_json
/// (rank 0). On failure it writes the message to error_file(options.worker_json, rank), prints
/// it, and returns 1.
int run_worker(const BenchOptions& options);

/// Where rank `rank` of a worker writing `result_path` leaves its error message.
std::string error_file(const std::string& result_path, int rank);

}  // namespace tandem::apps::bench
