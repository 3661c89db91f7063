#pragma once
/// DDP's gradient buckets in a profile (engine/profiler.h): each bucket's all-reduce as a span on a
/// track of its own, "DDP all-reduce (gloo)", from when the collective started running to when it
/// ended (Work::started_at(), ended_at()), so that a trace shows it beside the backward pass it
/// overlaps. The times are read when the recording stops: on NCCL the device may still be running
/// the collective when backward returns.

#include <cstddef>
#include <memory>
#include <string>

#include "parallel/comm/process_group.h"

namespace tandem::parallel {

/// While recording: bucket `index` (`bytes` of gradients of `parameters` parameters) is being
/// all-reduced by `work` over a group of `backend`. Does nothing otherwise.
void trace_bucket_all_reduce(const std::string& backend, size_t index, size_t bytes,
                             size_t parameters, std::shared_ptr<Work> work);

}  // namespace tandem::parallel
