#pragma once
/// Bodies of the row kernels of loss.cu: log-softmax forward and backward and the fused softmax
/// cross-entropy, one block of kRowBlock threads per row (block-stride over rows), and the mean
/// of the row losses in one block. Templates on a block policy (Note [Block policy] in
/// block.h).

#include <cmath>
#include <cstdint>

#include "engine/cuda/kernels/block.h"
#include "engine/cuda/kernels/grid.h"
#include "engine/host_device.h"

namespace tandem::cuda::kernels {

constexpr int kRowBlock = 128;

struct RowStats {
  float max;
  float log_sum;  ///< log(sum(exp(x - max)))
};

/// The max and log-sum-exp of the row x: (cols), for every thread of the block. broadcast: two
/// floats of shared memory.
template <typename Block>
TANDEM_HD RowStats row_stats(Block& block, const float* x, int64_t cols, float* broadcast) {
  float local_max = -INFINITY;
  for (int64_t c = block.thread(); c < cols; c += kRowBlock) local_max = MaxOp()(local_max, x[c]);
  const float block_max = block.reduce(local_max, MaxOp());
  if (block.thread() == 0) broadcast[0] = block_max;
  block.sync();
  const float max = broadcast[0];
  float local_sum = 0.0f;
  for (int64_t c = block.thread(); c < cols; c += kRowBlock) local_sum += expf(x[c] - max);
  const float block_sum = block.sum(local_sum);
  if (block.thread() == 0) broadcast[1] = logf(block_sum);
  block.sync();
  const RowStats stats{max, broadcast[1]};
  block.sync();  // the reduction storage and broadcast are reused for the next row
  return stats;
}

/// x, y: (rows, cols); block `block_index` of `blocks` takes rows block_index + k * blocks.
template <typename Block>
TANDEM_HD void log_softmax_forward_rows(Block& block, float* broadcast, int64_t block_index,
                                        int64_t blocks, const float* x, int64_t rows, int64_t cols,
                                        float* y) {
  for (int64_t row = block_index; row < rows; row += blocks) {
    const float* in = x + row * cols;
    const RowStats stats = row_stats(block, in, cols, broadcast);
    // (x - max) first: folding max into the shift would lose precision for large logits.
    for (int64_t c = block.thread(); c < cols; c += kRowBlock) {
      y[row * cols + c] = (in[c] - stats.max) - stats.log_sum;
    }
  }
}

/// grad_y, y, grad_x: (rows, cols); total: one float of shared memory.
template <typename Block>
TANDEM_HD void log_softmax_backward_rows(Block& block, float* total, int64_t block_index,
                                         int64_t blocks, const float* grad_y, const float* y,
                                         int64_t rows, int64_t cols, float* grad_x) {
  for (int64_t row = block_index; row < rows; row += blocks) {
    const float* g = grad_y + row * cols;
    float local = 0.0f;
    for (int64_t c = block.thread(); c < cols; c += kRowBlock) local += g[c];
    const float block_total = block.sum(local);
    if (block.thread() == 0) *total = block_total;
    block.sync();
    for (int64_t c = block.thread(); c < cols; c += kRowBlock) {
      grad_x[row * cols + c] = g[c] - expf(y[row * cols + c]) * *total;
    }
    block.sync();
  }
}

/// logits, log_probs: (rows, cols), labels: (rows) → row_loss: (rows), bad_row: () the
/// smallest row whose label is outside [0, cols) (rows < INT32_MAX: checked at launch).
template <typename Block>
TANDEM_HD void cross_entropy_rows(Block& block, float* broadcast, int64_t block_index,
                                  int64_t blocks, const float* logits, const int64_t* labels,
                                  int64_t rows, int64_t cols, float* log_probs, float* row_loss,
                                  int* bad_row) {
  for (int64_t row = block_index; row < rows; row += blocks) {
    const float* in = logits + row * cols;
    const RowStats stats = row_stats(block, in, cols, broadcast);
    for (int64_t c = block.thread(); c < cols; c += kRowBlock) {
      log_probs[row * cols + c] = (in[c] - stats.max) - stats.log_sum;
    }
    if (block.thread() == 0) {
      const int64_t label = labels[row];
      if (label < 0 || label >= cols) {
        Block::atomic_min(bad_row, static_cast<int>(row));
        row_loss[row] = NAN;
      } else {
        row_loss[row] = -((in[label] - stats.max) - stats.log_sum);
      }
    }
  }
}

/// row_loss: (rows) → loss: () their mean, in one block of kThreads (a fixed order:
/// deterministic); the block's reductions add doubles.
template <typename Block>
TANDEM_HD void mean_of_rows(Block& block, const float* row_loss, int64_t rows, float* loss) {
  double local = 0.0;
  for (int64_t r = block.thread(); r < rows; r += kThreads) local += row_loss[r];
  const double total = block.sum(local);
  if (block.thread() == 0) *loss = static_cast<float>(total / static_cast<double>(rows));
}

}  // namespace tandem::cuda::kernels
