// The bodies of batch_norm.cu (kernels/batch_norm.h and batch_norm_backward.h: the three steps
// of Note [Batch-norm kernels] forward and backward, with and without the fused ReLU and its
// residual (batch_norm2d_add_relu's, against the CPU's batch norm then add_relu), one value
// or a 16-byte pack per load, and inference) on a CPU grid: float32 against the CPU backend and
// bfloat16 against the float32 CPU backend on the same rounded inputs (Note [bfloat16 body
// checks] in body_checks.h). The plans here split channels into small chunks on purpose, so
// that every test crosses chunk, row and image boundaries.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/cuda/kernels/batch_norm.h"
#include "engine/cuda/kernels/batch_norm_backward.h"
#include "engine/running_statistics.h"
#include "engine/tandem.h"
#include "tests/engine/cuda/kernels/body_checks.h"
#include "tests/support/cpu_block.h"
#include "tests/support/cpu_grid.h"

namespace tandem::testing {
namespace {

namespace k = cuda::kernels;

constexpr float kEps = 1e-5f;
constexpr float kMomentum = 0.1f;

/// One batch norm of x: (N, C, H, W) and the gradient grad_y of its output; x, grad_y and the
/// residual (x's shape, added before the ReLU; undefined: none) are already what the bodies read
/// (rounded when T is bfloat16).
struct NormCase {
  Shape shape;
  Tensor x, grad_y, gamma, beta, running_mean, running_var, residual;
};

NormCase make_case(const Shape& shape, bool round, uint64_t seed, bool residual = false) {
  const Shape channels{shape[1]};
  NormCase c{shape,
             random_tensor(shape, seed, -3.0f, 5.0f),
             random_tensor(shape, seed + 1),
             random_tensor(channels, seed + 2, 0.5f, 2.0f),
             random_tensor(channels, seed + 3),
             random_tensor(channels, seed + 4),
             random_tensor(channels, seed + 5, 0.5f, 2.0f),
             Tensor()};
  if (residual) c.residual = random_tensor(shape, seed + 6);
  if (round) {
    c.x = rounded_to_bfloat16(c.x);
    c.grad_y = rounded_to_bfloat16(c.grad_y);
    if (residual) c.residual = rounded_to_bfloat16(c.residual);
  }
  return c;
}

/// The CPU backend's float32 results: y (ReLU applied when asked, after adding the residual when
/// there is one), the mean, 1 / sqrt(var + eps) from its variance, the running statistics after
/// the step, and the gradients, with grad_y masked by y > 0 for the fused ReLU (that masked grad_y
/// is the residual's gradient).
struct NormResults {
  std::vector<float> y, mean, inv_std, running_mean, running_var, grad_x, grad_gamma, grad_beta,
      grad_residual;
};

NormResults cpu_reference(const NormCase& c, bool relu) {
  const int64_t channels = c.shape[1];
  Tensor y = empty(c.shape), mean = empty({channels}), var = empty({channels});
  const BatchNormRunning running{c.running_mean.clone(), c.running_var.clone(), kMomentum};
  cpu().batch_norm_forward_training(c.x, c.gamma, c.beta, running, kEps, y, mean, var);
  Tensor grad = c.grad_y;
  if (relu) {
    Tensor relu_y = empty(c.shape);
    if (c.residual.defined()) {
      cpu().binary(BinaryOp::AddRelu, y, c.residual, relu_y);
    } else {
      cpu().unary(UnaryOp::Relu, y, 0.0f, relu_y);
    }
    y = relu_y;
    grad = empty(c.shape);
    cpu().binary(BinaryOp::ReluBackward, c.grad_y, y, grad);
  }
  Tensor grad_x = empty(c.shape), grad_gamma = empty({channels}), grad_beta = empty({channels});
  cpu().batch_norm_backward(grad, c.x, c.gamma, mean, var, kEps, grad_x, grad_gamma, grad_beta);
  std::vector<float> inv_std;
  for (const float v : var.to_vector<float>()) inv_std.push_back(1.0f / std::sqrt(v + kEps));
  return {y.to_vector<float>(),
          mean.to_vector<float>(),
          inv_std,
          running.mean.to_vector<float>(),
          running.var.to_vector<float>(),
          grad_x.to_vector<float>(),
          grad_gamma.to_vector<float>(),
          grad_beta.to_vector<float>(),
          grad.to_vector<float>()};
}

template <typename T>
std::vector<T> as(const Tensor& t) {
  if constexpr (std::is_same_v<T, float>) {
    return t.to_vector<float>();
  } else {
    return to_bfloat16(t);
  }
}

template <typename T>
std::vector<float> wide(const std::vector<T>& values) {
  return {values.begin(), values.end()};
}

/// A plan of `pack`-value packs whose chunks hold `chunk` packs (the last one fewer).
k::NormPlan plan_with_chunk(const k::NormShape& s, int pack, int64_t chunk) {
  const int64_t packs = s.n * s.hw / pack;
  return {pack, packs, (packs + chunk - 1) / chunk, chunk};
}

/// The statistics kernels' grid, (C, splits) blocks of kNormBlock CPU threads, in a shuffled
/// order fixed by `seed`.
template <typename Body>
void run_statistics_grid(const k::NormShape& s, const k::NormPlan& plan, Body body,
                         uint64_t seed = 1) {
  run_blocks<float>(
      s.c * plan.splits, k::kNormBlock,
      [&](CpuBlock<float>& block, int64_t b) { body(block, b / plan.splits, b % plan.splits); },
      seed);
}

/// The full-grid kernels' threads on `grid`.
template <typename Body>
void run_full_grid(CpuGrid grid, Body body) {
  run_grid(grid, [&](int64_t block, int64_t thread) {
    body(block * grid.threads + thread, grid.blocks * grid.threads);
  });
}

/// What the bodies produced for one case.
template <typename T>
struct BodyResults {
  std::vector<T> y, grad_x, grad_residual;
  std::vector<float> mean, inv_std, running_mean, running_var, grad_gamma, grad_beta;
};

// The forward's three steps and the backward's three steps, as batch_norm.cu runs them, the
// full-grid ones on each of `grids`: they must give the same bits on every grid.
template <int V, typename T>
BodyResults<T> run_bodies(const NormCase& c, const k::NormPlan& plan, bool relu,
                          const std::vector<CpuGrid>& grids, uint64_t seed = 1) {
  const k::NormShape s{c.shape[0], c.shape[1], c.shape[2] * c.shape[3]};
  const auto channels = static_cast<size_t>(s.c);
  const std::vector<T> x = as<T>(c.x), grad_y = as<T>(c.grad_y);
  const std::vector<T> residual = c.residual.defined() ? as<T>(c.residual) : std::vector<T>();
  const T* add = c.residual.defined() ? residual.data() : nullptr;
  BodyResults<T> r{std::vector<T>(x.size(), T(-7.0f)),  std::vector<T>(x.size(), T(-7.0f)),
                   std::vector<T>(add ? x.size() : 0),  std::vector<float>(channels, -7.0f),
                   std::vector<float>(channels, -7.0f), c.running_mean.to_vector<float>(),
                   c.running_var.to_vector<float>(),    std::vector<float>(channels, -7.0f),
                   std::vector<float>(channels, -7.0f)};
  std::vector<float> workspace(k::norm_workspace_floats(plan, s.c), -7.0f);
  float slot = 0.0f;
  run_statistics_grid(
      s, plan,
      [&](CpuBlock<float>& block, int64_t ch, int64_t split) {
        k::batch_norm_statistics_block<V>(block, &slot, ch, split, plan, x.data(), s,
                                          workspace.data());
      },
      seed);
  const k::RunningStatisticsPointers running{r.running_mean.data(), r.running_var.data(),
                                             kMomentum};
  run_grid_stride(k::BatchNormFinalizeBody{workspace.data(), plan, kEps, r.mean.data(),
                                           r.inv_std.data(), running, s.c});
  for (const CpuGrid& grid : grids) {
    std::vector<T> y(x.size(), T(-7.0f));
    run_full_grid(grid, [&](int64_t thread, int64_t threads) {
      k::batch_norm_normalize_packs<V>(thread, threads, x.data(), s, r.mean.data(),
                                       r.inv_std.data(), c.gamma.data<float>(),
                                       c.beta.data<float>(), add, relu, y.data());
    });
    if (&grid == &grids.front()) r.y = y;
    expect_all_equal(y, r.y, "y on a grid of " + std::to_string(grid.blocks) + " blocks");
  }
  const T* relu_y = relu ? r.y.data() : nullptr;
  run_statistics_grid(
      s, plan,
      [&](CpuBlock<float>& block, int64_t ch, int64_t split) {
        k::batch_norm_backward_statistics_block<V>(block, ch, split, plan, grad_y.data(), relu_y,
                                                   x.data(), s, r.mean.data(), workspace.data());
      },
      seed);
  float* coefficients = workspace.data() + s.c * plan.splits * 2;
  run_grid_stride(k::BatchNormBackwardFinalizeBody{workspace.data(), plan, r.inv_std.data(),
                                                   r.grad_gamma.data(), r.grad_beta.data(),
                                                   coefficients, s.c});
  for (const CpuGrid& grid : grids) {
    std::vector<T> grad_x(x.size(), T(-7.0f));
    std::vector<T> grad_residual(r.grad_residual.size(), T(-7.0f));
    run_full_grid(grid, [&](int64_t thread, int64_t threads) {
      k::batch_norm_grad_x_packs<V>(
          thread, threads, grad_y.data(), relu_y, x.data(), s, c.gamma.data<float>(), r.mean.data(),
          r.inv_std.data(), coefficients, grad_x.data(), add ? grad_residual.data() : nullptr);
    });
    if (&grid == &grids.front()) {
      r.grad_x = grad_x;
      r.grad_residual = grad_residual;
    }
    const std::string on = " on a grid of " + std::to_string(grid.blocks) + " blocks";
    expect_all_equal(grad_x, r.grad_x, "grad_x" + on);
    expect_all_equal(grad_residual, r.grad_residual, "grad_residual" + on);
  }
  return r;
}

// Runs the bodies for T in packs of V values with chunks of `chunk` packs, on every grid of
// grids_for() for the full-grid steps, and compares with the CPU backend: y and grad_x within
// `tolerance`; the statistics, running statistics and float32 gradients within
// `stat_tolerance`.
template <typename T, int V = 1>
void check_training(const Shape& shape, bool relu, int64_t chunk, double tolerance,
                    double stat_tolerance, bool residual = false) {
  const bool bfloat16 = std::is_same_v<T, BFloat16>;
  const NormCase c =
      make_case(shape, bfloat16, static_cast<uint64_t>(shape[0] * 100 + shape[1]), residual);
  const NormResults expected = cpu_reference(c, relu);
  const k::NormShape s{shape[0], shape[1], shape[2] * shape[3]};
  const k::NormPlan plan = plan_with_chunk(s, V, chunk);
  const std::string what = std::string(bfloat16 ? "bfloat16" : "float32") +
                           (residual ? " batch_norm_add_relu "
                            : relu   ? " batch_norm_relu "
                                     : " batch_norm ") +
                           shape_str(shape) + " pack " + std::to_string(V) + " splits " +
                           std::to_string(plan.splits);
  const BodyResults<T> r = run_bodies<V, T>(c, plan, relu, grids_for(s.n * s.c * s.hw / V));
  expect_all_near(wide(r.y), expected.y, tolerance, what + " y");
  expect_all_near(r.mean, expected.mean, stat_tolerance, what + " mean");
  expect_all_near(r.inv_std, expected.inv_std, stat_tolerance, what + " inv_std");
  expect_all_near(r.running_mean, expected.running_mean, stat_tolerance, what + " running_mean");
  expect_all_near(r.running_var, expected.running_var, stat_tolerance, what + " running_var");
  expect_all_near(wide(r.grad_x), expected.grad_x, tolerance, what + " grad_x");
  expect_all_near(r.grad_gamma, expected.grad_gamma, stat_tolerance, what + " grad_gamma");
  expect_all_near(r.grad_beta, expected.grad_beta, stat_tolerance, what + " grad_beta");
  if (residual) {
    // The masked gradient is stored as it was read: the CPU's relu_backward bit for bit.
    expect_all_near(wide(r.grad_residual), expected.grad_residual, 0.0, what + " grad_residual");
  }
}

TEST(BatchNormBodies, Float32MatchesTheCpuBackend) {
  for (const bool relu : {false, true}) {
    check_training<float>({4, 3, 5, 7}, relu, 30, 1e-4, 1e-4);     // chunks cross rows and images
    check_training<float>({2, 5, 33, 17}, relu, 300, 1e-4, 1e-4);  // many values per thread
    check_training<float>({3, 2, 37, 1}, relu, 1000, 1e-4, 1e-4);  // N * HW = 111, one chunk
    check_training<float>({5, 4, 1, 1}, relu, 2, 1e-4, 1e-4);      // HW = 1: a row is one value
    check_training<float>({6, 1, 3, 3}, relu, 13, 1e-4, 1e-4);     // C = 1
    check_training<float>({2, 40, 2, 3}, relu, 12, 1e-4, 1e-4);    // many channels
    check_training<float, 4>({3, 3, 4, 8}, relu, 5, 1e-4, 1e-4);   // packs of 4: 16 bytes
    check_training<float, 4>({2, 2, 2, 2}, relu, 1, 1e-4, 1e-4);   // one pack per row
  }
}

TEST(BatchNormBodies, BFloat16MatchesTheFloat32CpuBackendOnRoundedInputs) {
  for (const bool relu : {false, true}) {
    // Statistics and the float32 gradients see the same rounded inputs and sum in float32.
    check_training<BFloat16>({4, 3, 5, 7}, relu, 30, 2 * kBFloat16Tolerance, 1e-4);
    check_training<BFloat16>({2, 5, 33, 17}, relu, 300, 2 * kBFloat16Tolerance, 1e-4);
    check_training<BFloat16>({5, 4, 1, 1}, relu, 3, 2 * kBFloat16Tolerance, 1e-4);
    check_training<BFloat16, 8>({3, 4, 8, 8}, relu, 3, 2 * kBFloat16Tolerance, 1e-4);
    check_training<BFloat16, 8>({2, 16, 4, 4}, relu, 1, 2 * kBFloat16Tolerance, 1e-4);
  }
}

// batch_norm2d_add_relu's kernels (Note [Own batch-norm kernels]): the residual added before the
// ReLU, and its gradient (grad_y masked by the output) stored by the grad_x pass.
TEST(BatchNormBodies, WithAResidualMatchesBatchNormThenAddRelu) {
  check_training<float>({4, 3, 5, 7}, true, 30, 1e-4, 1e-4, true);
  check_training<float>({5, 4, 1, 1}, true, 2, 1e-4, 1e-4, true);
  check_training<float, 4>({3, 3, 4, 8}, true, 5, 1e-4, 1e-4, true);
  // The bodies round y once; the CPU reference rounds nothing (float32): one rounding apart.
  check_training<BFloat16>({4, 3, 5, 7}, true, 30, 2 * kBFloat16Tolerance, 1e-4, true);
  check_training<BFloat16, 8>({2, 16, 4, 4}, true, 1, 2 * kBFloat16Tolerance, 1e-4, true);
}

// The same plan gives the same bits whatever order the blocks run in: no atomics, partials
// added in a fixed order.
TEST(BatchNormBodies, ResultsDoNotDependOnTheOrderOfBlocks) {
  const NormCase c = make_case({4, 3, 6, 6}, false, 5);
  const k::NormPlan plan = plan_with_chunk({4, 3, 36}, 1, 10);
  const std::vector<CpuGrid> grid = {{3, 32}};
  const BodyResults<float> first = run_bodies<1, float>(c, plan, true, grid, 1);
  const BodyResults<float> second = run_bodies<1, float>(c, plan, true, grid, 2);
  expect_all_equal(second.y, first.y, "y");
  expect_all_equal(second.inv_std, first.inv_std, "inv_std");
  expect_all_equal(second.running_var, first.running_var, "running_var");
  expect_all_equal(second.grad_x, first.grad_x, "grad_x");
  expect_all_equal(second.grad_gamma, first.grad_gamma, "grad_gamma");
}

// Note [NaN through ReLU and max pooling]: a NaN in one channel's input makes that channel's
// outputs NaN through the fused ReLU (fmaxf would make them 0), and its gradients NaN too.
TEST(BatchNormBodies, ANaNGoesThroughTheFusedRelu) {
  NormCase c = make_case({2, 2, 3, 3}, false, 7);
  std::vector<float> x = c.x.to_vector<float>();
  x[9 + 4] = NAN;  // image 0, channel 1
  c.x = from_vector(x, c.shape);
  const BodyResults<float> r =
      run_bodies<1, float>(c, plan_with_chunk({2, 2, 9}, 1, 4), true, {{2, 32}});
  for (int n = 0; n < 2; ++n) {
    for (int i = 0; i < 9; ++i) {
      EXPECT_FALSE(std::isnan(r.y[n * 18 + i])) << "channel 0, image " << n << ", value " << i;
      EXPECT_TRUE(std::isnan(r.y[n * 18 + 9 + i])) << "channel 1, image " << n << ", value " << i;
      EXPECT_TRUE(std::isnan(r.grad_x[n * 18 + 9 + i])) << "channel 1, image " << n;
    }
  }
}

// The finalize moves the running statistics with the CPU backend's arithmetic: given the same
// batch mean, the running mean is the same float.
TEST(BatchNormBodies, FinalizeMovesTheRunningMeanAsTheCpuBackendDoes) {
  const NormCase c = make_case({3, 5, 4, 4}, false, 9);
  const k::NormPlan plan = plan_with_chunk({3, 5, 16}, 1, 12);
  const BodyResults<float> r = run_bodies<1, float>(c, plan, false, {{2, 64}});
  const std::vector<float> before = c.running_mean.to_vector<float>();
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(r.running_mean[i], running_average(before[i], r.mean[i], kMomentum)) << i;
  }
}

template <typename T, int V>
void check_inference(const Shape& shape, double tolerance) {
  const NormCase c = make_case(shape, std::is_same_v<T, BFloat16>, 77);
  Tensor expected = empty(shape);
  cpu().batch_norm_forward_inference(c.x, c.gamma, c.beta, c.running_mean, c.running_var, kEps,
                                     expected);
  const std::vector<T> x = as<T>(c.x);
  const k::NormShape s{shape[0], shape[1], shape[2] * shape[3]};
  std::vector<float> inv_std(static_cast<size_t>(s.c));
  run_grid_stride(k::BatchNormInvStdBody{c.running_var.data<float>(), kEps, inv_std.data(), s.c});
  for (const CpuGrid& grid : grids_for(c.x.numel() / V)) {
    std::vector<T> y(x.size(), T(-7.0f));
    run_full_grid(grid, [&](int64_t thread, int64_t threads) {
      k::batch_norm_normalize_packs<V>(thread, threads, x.data(), s, c.running_mean.data<float>(),
                                       inv_std.data(), c.gamma.data<float>(), c.beta.data<float>(),
                                       static_cast<const T*>(nullptr), false, y.data());
    });
    expect_all_near(wide(y), expected.to_vector<float>(), tolerance,
                    "batch_norm inference " + shape_str(shape));
  }
}

TEST(BatchNormBodies, InferenceMatchesTheCpuBackend) {
  check_inference<float, 1>({3, 4, 5, 6}, 1e-5);
  check_inference<float, 4>({3, 4, 2, 6}, 1e-5);
  check_inference<BFloat16, 1>({3, 4, 5, 6}, kBFloat16Tolerance);
  check_inference<BFloat16, 8>({2, 3, 4, 4}, kBFloat16Tolerance);
}

}  // namespace
}  // namespace tandem::testing
