// The bodies of pool.cu (max pooling with argmax, adaptive average pooling, both backwards) on
// a CPU grid, against the CPU backend and the plain references of tests/support: random shapes
// with padding, overlapping windows, ties, and adaptive outputs larger than their inputs.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/cuda/kernels/pool.h"
#include "engine/tandem.h"
#include "tests/engine/cuda/kernels/body_checks.h"
#include "tests/support/cpu_grid.h"
#include "tests/support/reference_ops.h"

namespace tandem::testing {
namespace {

namespace k = cuda::kernels;

std::string describe(const k::PoolShape& s) {
  return "x [" + std::to_string(s.n) + ", " + std::to_string(s.c) + ", " + std::to_string(s.h) +
         ", " + std::to_string(s.w) + "] -> [" + std::to_string(s.p) + ", " + std::to_string(s.q) +
         "] kernel " + std::to_string(s.kernel) + " stride " + std::to_string(s.stride) +
         " padding " + std::to_string(s.padding);
}

k::PoolShape random_max_pool(std::mt19937_64& random) {
  k::PoolShape s{};
  s.n = random_int(random, 1, 3);
  s.c = random_int(random, 1, 3);
  s.kernel = random_int(random, 1, 4);
  s.stride = random_int(random, 1, 3);
  s.padding = random_int(random, 0, s.kernel / 2);  // as PyTorch allows
  s.h = random_int(random, std::max<int64_t>(1, s.kernel - 2 * s.padding), 11);
  s.w = random_int(random, std::max<int64_t>(1, s.kernel - 2 * s.padding), 11);
  s.p = (s.h + 2 * s.padding - s.kernel) / s.stride + 1;
  s.q = (s.w + 2 * s.padding - s.kernel) / s.stride + 1;
  return s;
}

// Runs the forward and backward bodies on their launch grids, or on small grids where every
// thread loops; y, argmax and grad_x come back.
struct MaxPoolRun {
  std::vector<float> y, grad_x;
  std::vector<int32_t> argmax;
};
MaxPoolRun run_max_pool(const k::PoolShape& s, const std::vector<float>& x,
                        const std::vector<float>& grad_y, bool small_grids) {
  MaxPoolRun run;
  const int64_t outputs = s.n * s.c * s.p * s.q, inputs = s.n * s.c * s.h * s.w;
  run.y.assign(static_cast<size_t>(outputs), -7.0f);
  run.argmax.assign(static_cast<size_t>(outputs), -7);
  run.grad_x.assign(static_cast<size_t>(inputs), -7.0f);
  run_grid_stride(k::MaxPool2dForwardBody{x.data(), s, run.y.data(), run.argmax.data(), outputs},
                  small_grids ? CpuGrid{2, 16} : launch_grid(outputs));
  run_grid_stride(
      k::MaxPool2dBackwardBody{grad_y.data(), run.argmax.data(), s, run.grad_x.data(), inputs},
      small_grids ? CpuGrid{3, 32} : launch_grid(inputs));
  return run;
}

// Values from {-2, -1, 0}: many ties, and padding (which would be 0 if it counted) must lose
// to negative values.
TEST(MaxPoolBodies, MatchTheReferenceWithTiesAndPaddingOnRandomShapes) {
  std::mt19937_64 random(23);
  for (int round = 0; round < 300; ++round) {
    const k::PoolShape s = random_max_pool(random);
    std::vector<float> x(static_cast<size_t>(s.n * s.c * s.h * s.w));
    for (float& v : x) v = static_cast<float>(random_int(random, -2, 0));
    const std::vector<float> grad_y =
        random_tensor({s.n * s.c * s.p * s.q}, round).to_vector<float>();
    std::vector<float> expected_grad;
    const std::vector<float> expected = reference_max_pool2d(s.n, s.c, s.h, s.w, s.kernel, s.stride,
                                                             s.padding, x, grad_y, expected_grad);
    const MaxPoolRun run = run_max_pool(s, x, grad_y, false);
    const MaxPoolRun small = run_max_pool(s, x, grad_y, true);
    expect_all_equal(run.y, expected, describe(s));
    expect_all_equal(small.y, expected, describe(s));
    expect_all_near(run.grad_x, expected_grad, 1e-6, describe(s));
    expect_all_equal(small.grad_x, run.grad_x, describe(s));
    expect_all_equal(small.argmax, run.argmax, describe(s));
    // The argmax is the first maximum of its window, in the window's plane.
    for (size_t o = 0; o < run.y.size(); ++o) {
      const auto plane = static_cast<int64_t>(o) / (s.p * s.q);
      ASSERT_EQ(x[plane * s.h * s.w + run.argmax[o]], run.y[o]) << describe(s) << ", " << o;
    }
  }
}

// The CPU backend's max-pool workspace: the same int32 argmax per output as the CUDA kernel's.
std::vector<int32_t> cpu_argmax(const Tensor& workspace) {
  const auto* at = static_cast<const int32_t*>(workspace.data_ptr());
  return {at, at + workspace.numel() / static_cast<int64_t>(sizeof(int32_t))};
}

TEST(MaxPoolBodies, MatchTheCpuBackendOnRandomShapes) {
  std::mt19937_64 random(29);
  for (int round = 0; round < 100; ++round) {
    const k::PoolShape s = random_max_pool(random);
    const Tensor x = random_tensor({s.n, s.c, s.h, s.w}, round);  // ties unlikely
    const Tensor grad_y = random_tensor({s.n, s.c, s.p, s.q}, round + 1000);
    const Pool2dOptions options{.kernel_size = s.kernel, .stride = s.stride, .padding = s.padding};
    Tensor y = empty({s.n, s.c, s.p, s.q}), workspace, grad_x = empty({s.n, s.c, s.h, s.w});
    cpu().max_pool2d_forward(x, options, y, workspace);
    cpu().max_pool2d_backward(grad_y, x, y, workspace, options, grad_x);
    const MaxPoolRun run =
        run_max_pool(s, x.to_vector<float>(), grad_y.to_vector<float>(), round % 2 == 0);
    expect_all_equal(run.y, y.to_vector<float>(), describe(s));
    expect_all_equal(run.argmax, cpu_argmax(workspace), describe(s));
    expect_all_equal(run.grad_x, grad_x.to_vector<float>(), describe(s));  // same order of adds
  }
}

// Note [NaN through ReLU and max pooling]: with NaNs among ties and padding, the body and the CPU
// backend pick the same window element (a NaN over any number, the last of several NaNs), bit
// for bit, as PyTorch does.
TEST(MaxPoolBodies, ANaNWinsItsWindowAsOnTheCpuBackend) {
  std::mt19937_64 random(31);
  for (int round = 0; round < 100; ++round) {
    const k::PoolShape s = random_max_pool(random);
    std::vector<float> values(static_cast<size_t>(s.n * s.c * s.h * s.w));
    for (float& v : values) {
      const int64_t pick = random_int(random, 0, 4);
      v = pick == 0 ? std::nanf("") : static_cast<float>(pick - 3);  // NaN, -2, -1, 0, 1
    }
    const Tensor x = from_vector(values, {s.n, s.c, s.h, s.w});
    const Tensor grad_y = random_tensor({s.n, s.c, s.p, s.q}, round + 2000);
    const Pool2dOptions options{.kernel_size = s.kernel, .stride = s.stride, .padding = s.padding};
    Tensor y = empty({s.n, s.c, s.p, s.q}), workspace, grad_x = empty({s.n, s.c, s.h, s.w});
    cpu().max_pool2d_forward(x, options, y, workspace);
    cpu().max_pool2d_backward(grad_y, x, y, workspace, options, grad_x);
    const MaxPoolRun run = run_max_pool(s, values, grad_y.to_vector<float>(), round % 2 == 0);
    expect_all_equal(run.y, y.to_vector<float>(), describe(s));
    expect_all_equal(run.argmax, cpu_argmax(workspace), describe(s));
    expect_all_equal(run.grad_x, grad_x.to_vector<float>(), describe(s));
  }
}

// Outputs from 1 to twice the input: bins overlap when P does not divide H, and repeat inputs
// when P > H.
TEST(AdaptiveAvgPoolBodies, MatchTheCpuBackendIncludingOutputsLargerThanInputs) {
  std::mt19937_64 random(31);
  for (int round = 0; round < 300; ++round) {
    k::PoolShape s{};
    s.n = random_int(random, 1, 2);
    s.c = random_int(random, 1, 3);
    s.h = random_int(random, 1, 9);
    s.w = random_int(random, 1, 9);
    s.p = random_int(random, 1, 2 * s.h);
    s.q = random_int(random, 1, 2 * s.w);
    const Tensor x = random_tensor({s.n, s.c, s.h, s.w}, round);
    const Tensor grad_y = random_tensor({s.n, s.c, s.p, s.q}, round + 1000);
    Tensor y = empty({s.n, s.c, s.p, s.q}), grad_x = empty({s.n, s.c, s.h, s.w});
    cpu().adaptive_avg_pool2d_forward(x, y);
    cpu().adaptive_avg_pool2d_backward(grad_y, grad_x);
    const std::vector<float> reference =
        reference_adaptive_avg_pool2d(s.n, s.c, s.h, s.w, s.p, s.q, x.to_vector<float>());
    const int64_t outputs = y.numel(), inputs = x.numel();
    for (const CpuGrid& grid : grids_for(outputs)) {
      std::vector<float> actual(static_cast<size_t>(outputs), -7.0f);
      run_grid_stride(k::AdaptiveAvgPool2dForwardBody{x.data<float>(), s, actual.data(), outputs},
                      grid);
      expect_all_near(actual, y.to_vector<float>(), 1e-6, describe(s));
      expect_all_near(actual, reference, 1e-6, describe(s));
    }
    for (const CpuGrid& grid : grids_for(inputs)) {
      std::vector<float> actual(static_cast<size_t>(inputs), -7.0f);
      run_grid_stride(
          k::AdaptiveAvgPool2dBackwardBody{grad_y.data<float>(), s, actual.data(), inputs}, grid);
      expect_all_near(actual, grad_x.to_vector<float>(), 1e-5, describe(s));
    }
  }
}

}  // namespace
}  // namespace tandem::testing
