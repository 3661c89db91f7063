// The block-cooperative bodies (Note [Block policy] in engine/cuda/kernels/block.h): log-softmax,
// the cross-entropy rows and their mean (loss.cu), sums per block with split partials and the
// warp-per-row argmax (reduce.cu), each block's threads as std::threads, against the CPU
// backend. Grids with fewer blocks than rows make the block-stride loops wrap.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/cuda/kernels/reduce.h"
#include "engine/cuda/kernels/reduce_layout.h"
#include "engine/cuda/kernels/rows.h"
#include "engine/cuda/kernels/sum_plan.h"
#include "engine/tandem.h"
#include "tests/engine/cuda/kernels/body_checks.h"
#include "tests/support/cpu_block.h"
#include "tests/support/cpu_grid.h"

namespace tandem::testing {
namespace {

namespace k = cuda::kernels;

std::string describe(int64_t rows, int64_t cols, int64_t blocks) {
  return std::to_string(rows) + "x" + std::to_string(cols) + " on " + std::to_string(blocks) +
         " blocks";
}

TEST(RowBodies, LogSoftmaxForwardAndBackwardMatchTheCpuBackend) {
  std::mt19937_64 random(53);
  for (const int64_t cols : {1, 5, 127, 128, 129, 300}) {
    const int64_t rows = random_int(random, 1, 12);
    const Tensor x = random_tensor({rows, cols}, cols, -20.0f, 20.0f);
    const Tensor grad_y = random_tensor({rows, cols}, cols + 1);
    Tensor y = empty({rows, cols}), grad_x = empty({rows, cols});
    cpu().log_softmax_forward(x, y);
    cpu().log_softmax_backward(grad_y, y, grad_x);
    for (const int64_t blocks : {rows, int64_t{3}}) {
      std::vector<float> actual_y(static_cast<size_t>(rows * cols), -7.0f);
      std::vector<float> actual_grad(actual_y.size(), -7.0f);
      float broadcast[2] = {};
      run_blocks<float>(blocks, k::kRowBlock, [&](CpuBlock<float>& block, int64_t b) {
        k::log_softmax_forward_rows(block, broadcast, b, blocks, x.data<float>(), rows, cols,
                                    actual_y.data());
      });
      float total = 0.0f;
      run_blocks<float>(blocks, k::kRowBlock, [&](CpuBlock<float>& block, int64_t b) {
        k::log_softmax_backward_rows(block, &total, b, blocks, grad_y.data<float>(),
                                     y.data<float>(), rows, cols, actual_grad.data());
      });
      // Block reductions add in another order than the CPU backend: float rounding only.
      expect_all_near(actual_y, y.to_vector<float>(), 1e-5, describe(rows, cols, blocks));
      expect_all_near(actual_grad, grad_x.to_vector<float>(), 1e-5, describe(rows, cols, blocks));
    }
  }
}

// The CUDA backend's cross_entropy_forward: the rows kernel, then the mean in one block.
struct CrossEntropyRun {
  std::vector<float> log_probs, row_loss;
  float loss = -7.0f;
  int bad_row = INT32_MAX;
};
CrossEntropyRun run_cross_entropy(const Tensor& logits, const std::vector<int64_t>& labels,
                                  int64_t blocks) {
  const int64_t rows = logits.size(0), cols = logits.size(1);
  CrossEntropyRun run;
  run.log_probs.assign(static_cast<size_t>(rows * cols), -7.0f);
  run.row_loss.assign(static_cast<size_t>(rows), -7.0f);
  float broadcast[2] = {};
  run_blocks<float>(blocks, k::kRowBlock, [&](CpuBlock<float>& block, int64_t b) {
    k::cross_entropy_rows(block, broadcast, b, blocks, logits.data<float>(), labels.data(), rows,
                          cols, run.log_probs.data(), run.row_loss.data(), &run.bad_row);
  });
  run_blocks<double>(1, k::kThreads, [&](CpuBlock<double>& block, int64_t) {
    k::mean_of_rows(block, run.row_loss.data(), rows, &run.loss);
  });
  return run;
}

TEST(RowBodies, CrossEntropyRowsAndMeanMatchTheCpuBackend) {
  std::mt19937_64 random(59);
  for (const int64_t rows : {1, 7, 300}) {  // past 256 rows the mean's threads loop
    const int64_t cols = random_int(random, 1, 140);
    const Tensor logits = random_tensor({rows, cols}, rows, -10.0f, 10.0f);
    std::vector<int64_t> labels(static_cast<size_t>(rows));
    for (int64_t& label : labels) label = random_int(random, 0, cols - 1);
    Tensor loss = empty({}), log_probs = empty({rows, cols});
    cpu().cross_entropy_forward(logits, from_vector(labels, {rows}, {.dtype = DType::Int64}), loss,
                                log_probs);
    for (const int64_t blocks : {std::min<int64_t>(rows, 16), int64_t{2}}) {
      const CrossEntropyRun run = run_cross_entropy(logits, labels, blocks);
      const std::string what = describe(rows, cols, blocks);
      expect_all_near(run.log_probs, log_probs.to_vector<float>(), 1e-5, what);
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_NEAR(run.row_loss[r], -run.log_probs[r * cols + labels[r]], 1e-6) << what;
      }
      EXPECT_NEAR(run.loss, loss.item(), 1e-5 * std::max(1.0, std::abs(loss.item()))) << what;
      EXPECT_EQ(run.bad_row, INT32_MAX) << what;
    }
  }
}

TEST(RowBodies, LabelsOutOfRangeGiveTheSmallestBadRowAndANanLoss) {
  const int64_t rows = 9, cols = 4;
  const Tensor logits = random_tensor({rows, cols}, 1);
  const std::vector<int64_t> labels = {0, 1, 2, 3, 4, 0, -1, 2, 7};  // rows 4, 6, 8 are bad
  for (const int64_t blocks : {rows, int64_t{2}}) {
    const CrossEntropyRun run = run_cross_entropy(logits, labels, blocks);
    EXPECT_EQ(run.bad_row, 4);
    EXPECT_TRUE(std::isnan(run.row_loss[4]) && std::isnan(run.row_loss[6]) &&
                std::isnan(run.row_loss[8]));
    EXPECT_FALSE(std::isnan(run.row_loss[5]));
    EXPECT_TRUE(std::isnan(run.loss));
  }
}

// The CUDA backend's sum() on `sm_count` multiprocessors, each kernel on the CPU: one thread
// per output, or blocks of kSumBlock threads per (output, split) and then the partials.
std::vector<float> emulate_sum(const float* in, const k::ReduceLayout& layout, int sm_count) {
  std::vector<float> out(static_cast<size_t>(layout.outputs), -7.0f);
  const k::SumPlan plan = k::plan_sum(layout, sm_count);
  if (plan.per_thread) {
    run_grid_stride(k::SumPerThreadBody{in, layout, out.data(), layout.outputs});
    return out;
  }
  std::vector<double> partials(k::sum_workspace_bytes(layout, sm_count) / sizeof(double), -7.0);
  run_blocks<double>(layout.outputs * plan.splits, k::kSumBlock,
                     [&](CpuBlock<double>& block, int64_t b) {
                       k::sum_per_block(block, b / plan.splits, b % plan.splits, plan.splits, in,
                                        layout, plan.chunk, partials.data(), out.data());
                     });
  if (plan.splits > 1) {
    run_grid_stride(k::SumPartialsBody{partials.data(), plan.splits, out.data(), layout.outputs});
  }
  return out;
}

TEST(SumBlockBodies, PerThreadPerBlockAndSplitSumsMatchTheCpuBackend) {
  struct Case {
    Shape shape;
    std::vector<int64_t> dims;
    int sm_count;
  };
  const std::vector<Case> cases = {
      {{20000}, {0}, 2},          // one long sum, split 8 ways
      {{3, 6001}, {1}, 2},        // 3 sums, 2 splits each, the last chunk shorter
      {{4, 5, 6}, {0, 2}, 2},     // alternating kept and reduced dims, one block each
      {{2, 3000, 3}, {1}, 1},     // a strided reduced dim, 2 splits each
      {{40, 100}, {1}, 108},      // one block per output, no split
      {{9, 20}, {1}, 108},        // short sums: one thread per output
      {{1, 70000}, {0, 1}, 300},  // many SMs: as many splits as 2048-term chunks allow
  };
  int per_thread = 0, per_block = 0, split = 0;
  for (const Case& c : cases) {
    const Tensor in = random_tensor(c.shape, c.sm_count);
    Shape kept_shape = c.shape;
    for (const int64_t d : c.dims) kept_shape[d] = 1;
    Tensor expected = empty(kept_shape);
    cpu().sum(in, c.dims, expected);
    const k::ReduceLayout layout = k::reduce_layout(c.shape, c.dims);
    const k::SumPlan plan = k::plan_sum(layout, c.sm_count);
    (plan.per_thread ? per_thread : plan.splits == 1 ? per_block : split) += 1;
    const std::vector<float> actual = emulate_sum(in.data<float>(), layout, c.sm_count);
    expect_all_near(actual, expected.to_vector<float>(), 1e-5,
                    std::to_string(layout.outputs) + " sums of " +
                        std::to_string(layout.reduce_count) + ", " + std::to_string(plan.splits) +
                        " splits");
  }
  EXPECT_GT(per_thread, 0);
  EXPECT_GT(per_block, 0);
  EXPECT_GT(split, 0);
}

TEST(ArgmaxBodies, FirstMaximumOfEveryRowMatchesTheCpuBackend) {
  std::mt19937_64 random(61);
  for (const int64_t cols : {1, 5, 31, 32, 33, 100}) {
    const int64_t rows = random_int(random, 1, 40);
    std::vector<float> values(static_cast<size_t>(rows * cols));
    for (float& v : values) v = static_cast<float>(random_int(random, 0, 3));  // many ties
    const Tensor in = from_vector(values, {rows, cols});
    Tensor expected = empty({rows}, {.dtype = DType::Int64});
    cpu().argmax_rows(in, expected);
    const int64_t warps_per_block = k::kThreads / 32;
    for (const int64_t blocks : {(rows + warps_per_block - 1) / warps_per_block, int64_t{1}}) {
      std::vector<int64_t> actual(static_cast<size_t>(rows), -7);
      run_blocks<float>(blocks, k::kThreads, [&](CpuBlock<float>& warp, int64_t b) {
        k::argmax_rows_warps(warp, b, blocks, k::kThreads, in.data<float>(), rows, cols,
                             actual.data());
      });
      EXPECT_EQ(actual, expected.to_vector<int64_t>()) << describe(rows, cols, blocks);
    }
  }
}

}  // namespace
}  // namespace tandem::testing
