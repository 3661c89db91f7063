#include "parallel/bucket_trace.h"

#include "engine/profiler.h"

namespace tandem::parallel {

void trace_bucket_all_reduce(const std::string& backend, size_t index, size_t bytes,
                             size_t parameters, std::shared_ptr<Work> work) {
  if (!profiler::enabled() || work == nullptr) return;
  profiler::record_deferred_span(
      "DDP all-reduce (" + backend + ")", "all_reduce bucket " + std::to_string(index),
      profiler::Category::Communication,
      {{"bucket", static_cast<double>(index)},
       {"MiB", static_cast<double>(bytes) / (1 << 20)},
       {"parameters", static_cast<double>(parameters)}},
      [work = std::move(work)]() -> profiler::SpanTimes {
        work->synchronize();  // done by now on a host backend; NCCL: the device has run it
        return std::pair{work->started_at(), work->ended_at()};
      });
}

}  // namespace tandem::parallel
