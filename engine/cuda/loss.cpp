// Row-wise log-softmax and the fused softmax cross-entropy (kernels in loss.cu).

#include <climits>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/label_check.h"
#include "engine/cuda/on_device.h"
#include "engine/cuda/runtime/caching_allocator.h"

namespace tandem::cuda {

void CudaBackend::log_softmax_forward(const Tensor& x, Tensor& y) {
  OnDevice on(y, "log_softmax");
  kernels::log_softmax_forward(x.data<float>(), x.size(0), x.size(1), y.data<float>(), on.stream);
}

void CudaBackend::log_softmax_backward(const Tensor& grad_y, const Tensor& y, Tensor& grad_x) {
  OnDevice on(grad_x, "log_softmax_backward");
  kernels::log_softmax_backward(grad_y.data<float>(), y.data<float>(), y.size(0), y.size(1),
                                grad_x.data<float>(), on.stream);
}

// Note [Label check] (label_check.h): labels are checked without waiting for the GPU, so a bad
// label is reported by a later call on the device.
void CudaBackend::cross_entropy_forward(const Tensor& logits, const Tensor& labels, Tensor& loss,
                                        Tensor& log_probs) {
  OnDevice on(loss, "cross_entropy");
  raise_bad_labels(on.index, false);
  const int64_t rows = logits.size(0);
  const int64_t cols = logits.size(1);
  // Scratch: the per-row losses, then the bad-row flag (int32, 4-byte aligned after floats).
  const DeviceBuffer scratch(on.index, static_cast<size_t>(rows) * sizeof(float) + sizeof(int));
  auto* row_loss = static_cast<float*>(scratch.data());
  auto* bad_row = reinterpret_cast<int*>(row_loss + rows);
  kernels::fill(bad_row, 1, static_cast<int>(sizeof(int)), static_cast<uint64_t>(INT_MAX),
                on.stream);
  kernels::cross_entropy_forward(logits.data<float>(), labels.data<int64_t>(), rows, cols,
                                 log_probs.data<float>(), row_loss, bad_row, loss.data<float>(),
                                 on.stream);
  queue_label_check(bad_row, labels, cols, on.stream, on.index);
}

void CudaBackend::cross_entropy_backward(const Tensor& grad_loss, const Tensor& log_probs,
                                         const Tensor& labels, Tensor& grad_logits) {
  OnDevice on(grad_logits, "cross_entropy_backward");
  kernels::cross_entropy_backward(grad_loss.data<float>(), log_probs.data<float>(),
                                  labels.data<int64_t>(), log_probs.size(0), log_probs.size(1),
                                  grad_logits.data<float>(), on.stream);
}

}  // namespace tandem::cuda
