// The bodies of batch_norm.cu (kernels/batch_norm.h: training forward and backward per channel
// block, with and without the fused ReLU, and the inference body) on a CPU grid, float32
// against the CPU backend and bfloat16 against the float32 CPU backend on the same rounded
// inputs (Note [bfloat16 body checks] in body_checks.h).

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/cuda/kernels/batch_norm.h"
#include "engine/tandem.h"
#include "tests/engine/cuda_kernels/body_checks.h"
#include "tests/support/cpu_block.h"
#include "tests/support/cpu_grid.h"

namespace tandem::testing {
namespace {

namespace k = cuda::kernels;

constexpr float kEps = 1e-5f;

/// One batch norm of x: (N, C, H, W), with the fused ReLU or not, and the gradient grad_y of its
/// output; x and grad_y are already what the body reads (rounded when T is bfloat16).
struct NormCase {
  Shape shape;
  Tensor x, grad_y, gamma, beta;
};

NormCase make_case(const Shape& shape, bool round, uint64_t seed) {
  NormCase c{shape, random_tensor(shape, seed, -3.0f, 5.0f), random_tensor(shape, seed + 1),
             random_tensor({shape[1]}, seed + 2, 0.5f, 2.0f), random_tensor({shape[1]}, seed + 3)};
  if (round) {
    c.x = rounded_to_bfloat16(c.x);
    c.grad_y = rounded_to_bfloat16(c.grad_y);
  }
  return c;
}

/// The CPU backend's float32 results: y (ReLU applied when asked), the saved statistics, and the
/// gradients, with grad_y masked by y > 0 for the fused ReLU.
struct NormResults {
  std::vector<float> y, save_mean, save_var, grad_x, grad_gamma, grad_beta;
};

NormResults cpu_reference(const NormCase& c, bool relu) {
  const int64_t channels = c.shape[1];
  Tensor y = empty(c.shape), mean = empty({channels}), var = empty({channels});
  cpu().batch_norm_forward_training(c.x, c.gamma, c.beta, kEps, y, mean, var);
  Tensor grad = c.grad_y;
  if (relu) {
    Tensor relu_y = empty(c.shape);
    cpu().unary(UnaryOp::Relu, y, 0.0f, relu_y);
    y = relu_y;
    grad = empty(c.shape);
    cpu().binary(BinaryOp::ReluBackward, c.grad_y, y, grad);
  }
  Tensor grad_x = empty(c.shape), grad_gamma = empty({channels}), grad_beta = empty({channels});
  cpu().batch_norm_backward(grad, c.x, c.gamma, mean, var, kEps, grad_x, grad_gamma, grad_beta);
  return {y.to_vector<float>(),      mean.to_vector<float>(),       var.to_vector<float>(),
          grad_x.to_vector<float>(), grad_gamma.to_vector<float>(), grad_beta.to_vector<float>()};
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

// Runs the training bodies for T on `blocks` blocks (fewer than the channels: block-stride) and
// compares with the CPU backend: outputs within `tolerance`, statistics and the float32
// gradients of gamma and beta within `stat_tolerance`.
template <typename T>
void check_training(const Shape& shape, bool relu, int64_t blocks, double tolerance,
                    double stat_tolerance) {
  const bool bfloat16 = std::is_same_v<T, BFloat16>;
  const NormCase c = make_case(shape, bfloat16, static_cast<uint64_t>(shape[0] * 100 + shape[1]));
  const NormResults expected = cpu_reference(c, relu);
  const k::NormShape s{shape[0], shape[1], shape[2] * shape[3]};
  const std::string what = std::string(bfloat16 ? "bfloat16" : "float32") +
                           (relu ? " batch_norm_relu " : " batch_norm ") + shape_str(shape);
  const auto channels = static_cast<size_t>(shape[1]);
  const std::vector<T> x = as<T>(c.x), grad_y = as<T>(c.grad_y);
  std::vector<T> y(x.size(), T(-7.0f)), grad_x(x.size(), T(-7.0f));
  std::vector<float> mean(channels, -7.0f), var(channels, -7.0f);
  std::vector<float> grad_gamma(channels, -7.0f), grad_beta(channels, -7.0f);
  float broadcast[2];
  run_blocks<float>(blocks, k::kNormBlock, [&](CpuBlock<float>& block, int64_t b) {
    k::batch_norm_forward_channels(block, broadcast, b, blocks, x.data(), s, c.gamma.data<float>(),
                                   c.beta.data<float>(), kEps, relu, y.data(), mean.data(),
                                   var.data());
  });
  expect_all_near(wide(y), expected.y, tolerance, what + " y");
  expect_all_near(mean, expected.save_mean, stat_tolerance, what + " mean");
  expect_all_near(var, expected.save_var, stat_tolerance, what + " var");
  run_blocks<float>(blocks, k::kNormBlock, [&](CpuBlock<float>& block, int64_t b) {
    k::batch_norm_backward_channels(block, broadcast, b, blocks, grad_y.data(),
                                    relu ? y.data() : nullptr, x.data(), s, c.gamma.data<float>(),
                                    mean.data(), var.data(), kEps, grad_x.data(), grad_gamma.data(),
                                    grad_beta.data());
  });
  expect_all_near(wide(grad_x), expected.grad_x, tolerance, what + " grad_x");
  expect_all_near(grad_gamma, expected.grad_gamma, stat_tolerance, what + " grad_gamma");
  expect_all_near(grad_beta, expected.grad_beta, stat_tolerance, what + " grad_beta");
}

TEST(BatchNormBodies, Float32MatchesTheCpuBackend) {
  for (const bool relu : {false, true}) {
    check_training<float>({4, 3, 5, 7}, relu, 2, 1e-4, 1e-4);
    check_training<float>({2, 5, 33, 17}, relu, 5, 1e-4, 1e-4);  // many values per thread
    check_training<float>({1, 2, 1, 1}, relu, 1, 1e-4, 1e-4);    // one value per channel
  }
}

TEST(BatchNormBodies, BFloat16MatchesTheFloat32CpuBackendOnRoundedInputs) {
  for (const bool relu : {false, true}) {
    // Statistics and the float32 gradients see the same rounded inputs and sum in float32.
    check_training<BFloat16>({4, 3, 5, 7}, relu, 2, 2 * kBFloat16Tolerance, 1e-4);
    check_training<BFloat16>({2, 5, 33, 17}, relu, 5, 2 * kBFloat16Tolerance, 1e-4);
  }
}

template <typename T>
void check_inference(double tolerance) {
  const Shape shape{3, 4, 5, 6};
  const NormCase c = make_case(shape, std::is_same_v<T, BFloat16>, 77);
  const Tensor running_mean = random_tensor({4}, 78);
  const Tensor running_var = random_tensor({4}, 79, 0.5f, 3.0f);
  Tensor expected = empty(shape);
  cpu().batch_norm_forward_inference(c.x, c.gamma, c.beta, running_mean, running_var, kEps,
                                     expected);
  const std::vector<T> x = as<T>(c.x);
  const k::NormShape s{3, 4, 30};
  for (const CpuGrid& grid : grids_for(c.x.numel())) {
    std::vector<T> y(x.size(), T(-7.0f));
    run_grid_stride(
        k::BatchNormInferenceBody<T>{x.data(), s, c.gamma.data<float>(), c.beta.data<float>(),
                                     running_mean.data<float>(), running_var.data<float>(), kEps,
                                     y.data(), c.x.numel()},
        grid);
    expect_all_near(wide(y), expected.to_vector<float>(), tolerance, "batch_norm inference");
  }
}

TEST(BatchNormBodies, InferenceMatchesTheCpuBackend) {
  check_inference<float>(1e-5);
  check_inference<BFloat16>(kBFloat16Tolerance);
}

}  // namespace
}  // namespace tandem::testing
