// Row-wise log-softmax and the fused softmax cross-entropy: one block per row of the logits. The
// bodies are in kernels/rows.h (block-cooperative) and kernels/loss.h (per element).

#include "engine/cuda/kernels/block.cuh"
#include "engine/cuda/kernels/launch.cuh"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/kernels/loss.h"
#include "engine/cuda/kernels/rows.h"

namespace tandem::cuda::kernels {
namespace {

using RowBlock = CudaBlock<float, kRowBlock>;

// x, y: (rows, cols); one block per row (block-stride over rows).
__global__ void log_softmax_forward_kernel(const float* x, int64_t rows, int64_t cols, float* y) {
  __shared__ RowBlock::Storage storage;
  __shared__ float broadcast[2];
  RowBlock block(storage);
  log_softmax_forward_rows(block, broadcast, blockIdx.x, gridDim.x, x, rows, cols, y);
}

// grad_y, y, grad_x: (rows, cols)
__global__ void log_softmax_backward_kernel(const float* grad_y, const float* y, int64_t rows,
                                            int64_t cols, float* grad_x) {
  __shared__ RowBlock::Storage storage;
  __shared__ float total;
  RowBlock block(storage);
  log_softmax_backward_rows(block, &total, blockIdx.x, gridDim.x, grad_y, y, rows, cols, grad_x);
}

// logits, log_probs: (rows, cols), labels: (rows) → row_loss: (rows), bad_row: ()
__global__ void cross_entropy_rows_kernel(const float* logits, const int64_t* labels, int64_t rows,
                                          int64_t cols, float* log_probs, float* row_loss,
                                          int* bad_row) {
  __shared__ RowBlock::Storage storage;
  __shared__ float broadcast[2];
  RowBlock block(storage);
  cross_entropy_rows(block, broadcast, blockIdx.x, gridDim.x, logits, labels, rows, cols, log_probs,
                     row_loss, bad_row);
}

// row_loss: (rows) → loss: () mean, in one block of kThreads.
__global__ void mean_kernel(const float* row_loss, int64_t rows, float* loss) {
  using Block = CudaBlock<double, kThreads>;
  __shared__ Block::Storage storage;
  Block block(storage);
  mean_of_rows(block, row_loss, rows, loss);
}

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(std::clamp<int64_t>(rows, 1, 1 << 16));
}

}  // namespace

void log_softmax_forward(const float* x, int64_t rows, int64_t cols, float* y,
                         cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  log_softmax_forward_kernel<<<row_blocks(rows), kRowBlock, 0, stream>>>(x, rows, cols, y);
  CUDA_CHECK_LAUNCH();
}

void log_softmax_backward(const float* grad_y, const float* y, int64_t rows, int64_t cols,
                          float* grad_x, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  log_softmax_backward_kernel<<<row_blocks(rows), kRowBlock, 0, stream>>>(grad_y, y, rows, cols,
                                                                          grad_x);
  CUDA_CHECK_LAUNCH();
}

void cross_entropy_forward(const float* logits, const int64_t* labels, int64_t rows, int64_t cols,
                           float* log_probs, float* row_loss, int* bad_row, float* loss,
                           cudaStream_t stream) {
  TANDEM_CHECK(rows > 0 && cols > 0, "[cross_entropy] empty logits");
  TANDEM_CHECK(rows < INT32_MAX, "[cross_entropy] ", rows, " rows is too many");
  cross_entropy_rows_kernel<<<row_blocks(rows), kRowBlock, 0, stream>>>(
      logits, labels, rows, cols, log_probs, row_loss, bad_row);
  CUDA_CHECK_LAUNCH();
  mean_kernel<<<1, kThreads, 0, stream>>>(row_loss, rows, loss);
  CUDA_CHECK_LAUNCH();
}

void cross_entropy_backward(const float* grad_loss, const float* log_probs, const int64_t* labels,
                            int64_t rows, int64_t cols, float* grad_logits, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  launch_grid_stride(
      CrossEntropyBackwardBody{grad_loss, log_probs, labels, rows, cols, grad_logits, rows * cols},
      stream);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda::kernels
