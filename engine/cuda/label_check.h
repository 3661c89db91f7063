#pragma once
/// Note [Label check]: the backend contract says a cross_entropy label outside [0, K) throws,
/// but the labels of a CUDA loss are on the GPU, and waiting for the kernel that checks them
/// would stall the host every step (Note [Host syncs] in apps/train_cifar/pending_steps.h). So the
/// kernel leaves the first bad row in device memory, an asynchronous copy brings it to pinned host
/// memory behind an event, and the check is read when that event has passed: at the next
/// cross_entropy on the device, or at raise_bad_labels(device, true). The error thus comes one
/// or more losses late; the loss of the step with a bad label is NaN, so a trainer that checks
/// for NaN still stops at that step. (PyTorch uses a device-side assert, which kills the CUDA
/// context.)

#include <cuda_runtime_api.h>

#include "engine/tensor.h"

namespace tandem::cuda {

/// Queues the read-back of `bad_row` on `stream` of `device`: a device int32 that the
/// cross-entropy kernel left at INT32_MAX or set to the first row of `labels` outside
/// [0, classes). `labels` is kept until the check has been read, to name the bad label.
void queue_label_check(const int* bad_row, const Tensor& labels, int64_t classes,
                       cudaStream_t stream, int device);

/// Throws "[cross_entropy] label L at row R is outside [0, K)" for the oldest finished check on
/// `device` that found a bad label (each error once). With `wait`, waits for every queued check
/// first; without, reads only those already done and never blocks, unless more than a few
/// dozen are queued (the oldest is then waited for, bounding the labels kept).
void raise_bad_labels(int device, bool wait);

}  // namespace tandem::cuda
