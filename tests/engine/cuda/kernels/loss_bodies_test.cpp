// The per-element body of loss.cu (the cross-entropy backward) on a CPU grid, against the CPU
// backend.

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/cuda/kernels/loss.h"
#include "engine/tandem.h"
#include "tests/engine/cuda/kernels/body_checks.h"
#include "tests/support/cpu_grid.h"

namespace tandem::testing {
namespace {

namespace k = cuda::kernels;

TEST(CrossEntropyBodies, BackwardMatchesTheCpuBackend) {
  std::mt19937_64 random(47);
  for (int round = 0; round < 60; ++round) {
    const int64_t rows = random_int(random, 1, 40), cols = random_int(random, 1, 30);
    const Tensor logits = random_tensor({rows, cols}, round, -5.0f, 5.0f);
    std::vector<int64_t> label_values(static_cast<size_t>(rows));
    for (int64_t& label : label_values) label = random_int(random, 0, cols - 1);
    const Tensor labels = from_vector(label_values, {rows}, {.dtype = DType::Int64});
    Tensor loss = empty({}), log_probs = empty({rows, cols});
    cpu().cross_entropy_forward(logits, labels, loss, log_probs);
    const Tensor grad_loss = full({}, 0.5 + round);
    Tensor expected = empty({rows, cols});
    cpu().cross_entropy_backward(grad_loss, log_probs, labels, expected);
    for (const CpuGrid& grid : grids_for(rows * cols)) {
      std::vector<float> actual(static_cast<size_t>(rows * cols), -7.0f);
      run_grid_stride(k::CrossEntropyBackwardBody{grad_loss.data<float>(), log_probs.data<float>(),
                                                  labels.data<int64_t>(), rows, cols, actual.data(),
                                                  rows * cols},
                      grid);
      expect_all_near(actual, expected.to_vector<float>(), 1e-6,
                      std::to_string(rows) + "x" + std::to_string(cols));
    }
  }
}

}  // namespace
}  // namespace tandem::testing
