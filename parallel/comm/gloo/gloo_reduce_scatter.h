#pragma once
// The Gloo group's reduce-scatter (Note [Ring reduce-scatter]). Internal to the Gloo group: it
// names Gloo's types, so it is not installed.
#include <chrono>
#include <cstdint>
#include <memory>

#include "engine/tensor.h"
#include "parallel/comm/host_reduce.h"

namespace gloo {
class Context;
}

namespace tandem::parallel {

/// output (n elements) on rank r = input chunk r (elements [r·n, (r+1)·n)) reduced over the
/// ranks with `reduce`; input keeps its values. Contiguous CPU tensors of one dtype. Throws
/// Gloo's error on a failure or at the timeout (which breaks the context, as every Gloo
/// collective's does).
void ring_reduce_scatter(const std::shared_ptr<gloo::Context>& context, const Tensor& output,
                         const Tensor& input, const HostReduceFunction& reduce, uint32_t tag,
                         std::chrono::milliseconds timeout);

}  // namespace tandem::parallel
