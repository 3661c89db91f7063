#pragma once
/// A Profile as a Chrome trace (the JSON Trace Event Format that torch.profiler's
/// export_chrome_trace() writes), which https://ui.perfetto.dev and chrome://tracing open.
///
/// Note [Chrome trace]: every event is a complete event ("ph": "X") with "ts" and "dur" in
/// microseconds (steady_clock: comparable between the ranks of one machine), the process's "pid"
/// and the thread's "tid", "name" and "cat" (profiler::category_name), and its FLOPs (as
/// "GFLOP") and other values under "args". Metadata events ("ph": "M") name the process and each
/// thread, and order the threads: the first to record first, span tracks (DDP's all-reduce
/// buckets) last, each on a "tid" of its own so that they show as their own row beside the
/// threads whose work they overlap.

#include <string>

#include "engine/profiler.h"

namespace tandem::profiler {

/// The trace as JSON text; `process_name` names the process ("train_cifar rank 0").
std::string chrome_trace_json(const Profile& profile, const std::string& process_name);

/// Writes chrome_trace_json() to `path`; throws "[profiler] cannot write PATH" on failure.
void write_chrome_trace(const Profile& profile, const std::string& path,
                        const std::string& process_name);

}  // namespace tandem::profiler
