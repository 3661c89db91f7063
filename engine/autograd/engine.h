#pragma once
/// The backward engine.
///
/// Note [Per-device backward threads]: every device that appears in a graph has
/// one persistent worker thread; a node runs on the worker of its device, and
/// the calling thread waits. A graph spanning cpu:0 and cpu:1 (DataParallel
/// replicas) therefore runs both halves concurrently, each on its own thread
/// with its share of the caller's CPU threads. Within a device, ready nodes run
/// newest first (highest sequence number), i.e. in reverse forward order.
///
/// Note [Backward on the calling thread]: the nodes of the first root's device, when it is a
/// CPU device, run on the thread that called backward() instead of that device's worker (as
/// PyTorch runs CPU work on the caller). Forward and backward of a one-device model then share
/// one OpenMP team: with a second team on the worker, each team's threads spin-waited while the
/// other computed, on the same cores (measured: ResNet-20 on 2 cores, see docs/benchmarks.md).
/// Other devices of the graph (DataParallel's cpu:1, ...) keep their workers and run
/// concurrently. Hooks and nodes of that device therefore run on the caller's thread.

#include <functional>
#include <vector>

#include "engine/tensor.h"

namespace tandem::autograd {

/// Computes gradients of roots (seeded with grad_roots, one per root) and
/// accumulates them into the leaves. Throws the first error any node raised,
/// after the whole graph task has stopped.
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
                  bool retain_graph);

/// From inside a backward pass (a node or a gradient hook): runs `callback` on the thread that
/// called backward(), after every node of this pass has run and before backward() returns
/// (PyTorch's Engine::queue_callback; DDP's Reducer waits for its all-reduces there). Callbacks
/// run in the order queued, and not at all if a node failed; a callback's exception leaves
/// backward().
void queue_callback(std::function<void()> callback);

}  // namespace tandem::autograd
