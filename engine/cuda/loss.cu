// Row-wise log-softmax and the fused softmax cross-entropy: one block per row of the logits.

#include <cub/block/block_reduce.cuh>

#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/loss.h"
#include "engine/cuda/launch.cuh"

namespace tandem::cuda::kernels {
namespace {

constexpr int kRowBlock = 128;
using FloatReduce = cub::BlockReduce<float, kRowBlock>;
using DoubleReduce = cub::BlockReduce<double, kThreads>;

struct MaxOp {
  __device__ float operator()(float a, float b) const { return a > b ? a : b; }
};

struct RowStats {
  float max;
  float log_sum;  ///< log(sum(exp(x - max)))
};

// The max and log-sum-exp of one row, for every thread of the block.
__device__ RowStats row_stats(const float* x, int64_t cols, FloatReduce::TempStorage& storage,
                              float* broadcast) {
  float local_max = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += kRowBlock) local_max = MaxOp()(local_max, x[c]);
  const float block_max = FloatReduce(storage).Reduce(local_max, MaxOp());
  if (threadIdx.x == 0) broadcast[0] = block_max;
  __syncthreads();
  const float max = broadcast[0];
  float local_sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += kRowBlock) local_sum += expf(x[c] - max);
  const float block_sum = FloatReduce(storage).Sum(local_sum);
  if (threadIdx.x == 0) broadcast[1] = logf(block_sum);
  __syncthreads();
  const RowStats stats{max, broadcast[1]};
  __syncthreads();  // storage and broadcast are reused for the next row
  return stats;
}

// x, y: (rows, cols); one block per row (block-stride over rows).
__global__ void log_softmax_forward_kernel(const float* x, int64_t rows, int64_t cols, float* y) {
  __shared__ FloatReduce::TempStorage storage;
  __shared__ float broadcast[2];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* in = x + row * cols;
    const RowStats stats = row_stats(in, cols, storage, broadcast);
    // (x - max) first: folding max into the shift would lose precision for large logits.
    for (int64_t c = threadIdx.x; c < cols; c += kRowBlock) {
      y[row * cols + c] = (in[c] - stats.max) - stats.log_sum;
    }
  }
}

// grad_y, y, grad_x: (rows, cols)
__global__ void log_softmax_backward_kernel(const float* grad_y, const float* y, int64_t rows,
                                            int64_t cols, float* grad_x) {
  __shared__ FloatReduce::TempStorage storage;
  __shared__ float total;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* g = grad_y + row * cols;
    float local = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += kRowBlock) local += g[c];
    const float block_total = FloatReduce(storage).Sum(local);
    if (threadIdx.x == 0) total = block_total;
    __syncthreads();
    for (int64_t c = threadIdx.x; c < cols; c += kRowBlock) {
      grad_x[row * cols + c] = g[c] - expf(y[row * cols + c]) * total;
    }
    __syncthreads();
  }
}

// logits, log_probs: (rows, cols), labels: (rows) → row_loss: (rows), bad_row: ()
__global__ void cross_entropy_rows_kernel(const float* logits, const int64_t* labels, int64_t rows,
                                          int64_t cols, float* log_probs, float* row_loss,
                                          int* bad_row) {
  __shared__ FloatReduce::TempStorage storage;
  __shared__ float broadcast[2];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* in = logits + row * cols;
    const RowStats stats = row_stats(in, cols, storage, broadcast);
    for (int64_t c = threadIdx.x; c < cols; c += kRowBlock) {
      log_probs[row * cols + c] = (in[c] - stats.max) - stats.log_sum;
    }
    if (threadIdx.x == 0) {
      const int64_t label = labels[row];
      if (label < 0 || label >= cols) {
        atomicMin(bad_row, static_cast<int>(row));  // rows < INT32_MAX: checked at launch
        row_loss[row] = NAN;
      } else {
        row_loss[row] = -((in[label] - stats.max) - stats.log_sum);
      }
    }
  }
}

// row_loss: (rows) → loss: () mean, in one block (a fixed order: deterministic).
__global__ void mean_kernel(const float* row_loss, int64_t rows, float* loss) {
  __shared__ DoubleReduce::TempStorage storage;
  double local = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += kThreads) local += row_loss[r];
  const double total = DoubleReduce(storage).Sum(local);
  if (threadIdx.x == 0) *loss = static_cast<float>(total / static_cast<double>(rows));
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
