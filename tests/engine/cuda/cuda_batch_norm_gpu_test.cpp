// The CUDA backend's batch norm against the CPU backend: the own kernels (bfloat16, and float32
// through the fused ReLU; Note [Batch-norm kernels]) at shapes that take every path (packs of 8
// or single values, one chunk per channel or many, one channel or hundreds), cuDNN's float32
// path, and what both save and update (Note [Batch-norm statistics], Note [Running statistics]).
// bfloat16 inputs are drawn already rounded, so the CPU's float32 reference sees the same values.
// The kernel bodies are also checked without a GPU (tests/engine/cuda/kernels).

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/tandem.h"
#include "tests/engine/cuda/gpu_comparisons.h"
#include "tests/support/cuda_skip.h"

namespace tandem {
namespace {

using testing::expect_close;

constexpr double kBFloat16Tolerance = 1.0 / 128;  // a bfloat16 ulp is 2^-8..2^-7 relative
constexpr float kEps = 1e-5f;
constexpr float kMomentum = 0.1f;
const Device kGpu = Device::cuda(0);

Backend& cpu() {
  return backend_for(Device::cpu());
}
Backend& gpu() {
  return backend_for(kGpu);
}

/// Uniform values in [low, high), rounded to bfloat16 and widened back: float32 on the CPU.
Tensor draw(const Shape& shape, uint64_t seed, float low = -2.0f, float high = 2.0f) {
  Generator generator(seed);
  return uniform(shape, low, high, generator).to(DType::BFloat16).to(DType::Float32);
}

Tensor on_gpu(const Tensor& reference, DType dtype) {
  return reference.to(dtype).to(kGpu);
}

/// A CUDA result as float32 on the host, to compare with the CPU's.
Tensor host(const Tensor& t) {
  return t.to(Device::cpu()).to(DType::Float32);
}

/// 1 / sqrt(var + eps) of the CPU's saved variance: what CUDA saves.
Tensor inv_std_of(const Tensor& var) {
  std::vector<float> out;
  for (const float v : var.to_vector<float>()) out.push_back(1.0f / std::sqrt(v + kEps));
  return from_vector(out, var.shape());
}

/// Everything one training step of batch norm produces.
struct Step {
  Tensor y, mean, inv_std, running_mean, running_var, grad_x, grad_gamma, grad_beta;
};

/// Inputs of one step: x and grad_y (N, C, H, W), gamma, beta, running statistics (C).
struct Inputs {
  Tensor x, grad_y, gamma, beta, running_mean, running_var;
};

Inputs draw_inputs(const Shape& shape, uint64_t seed) {
  const Shape c{shape[1]};
  return {draw(shape, seed, -3.0f, 5.0f),
          draw(shape, seed + 1),
          draw(c, seed + 2, 0.5f, 2.0f),
          draw(c, seed + 3),
          draw(c, seed + 4),
          draw(c, seed + 5, 0.5f, 2.0f)};
}

Step cpu_step(const Inputs& in, bool relu) {
  const int64_t c = in.x.size(1);
  Step s{empty(in.x.shape()),    empty({c}),          Tensor(),   in.running_mean.clone(),
         in.running_var.clone(), empty(in.x.shape()), empty({c}), empty({c})};
  Tensor var = empty({c});
  cpu().batch_norm_forward_training(
      in.x, in.gamma, in.beta, {s.running_mean, s.running_var, kMomentum}, kEps, s.y, s.mean, var);
  s.inv_std = inv_std_of(var);
  Tensor grad = in.grad_y;
  if (relu) {
    Tensor relu_y = empty(in.x.shape());
    cpu().unary(UnaryOp::Relu, s.y, 0.0f, relu_y);
    s.y = relu_y;
    grad = empty(in.x.shape());
    cpu().binary(BinaryOp::ReluBackward, in.grad_y, s.y, grad);
  }
  cpu().batch_norm_backward(grad, in.x, in.gamma, s.mean, var, kEps, s.grad_x, s.grad_gamma,
                            s.grad_beta);
  return s;
}

/// The CUDA backend's step with activations of `dtype`; `relu` takes the fused kernels.
Step gpu_step(const Inputs& in, DType dtype, bool relu) {
  const int64_t c = in.x.size(1);
  const TensorOptions act{.dtype = dtype, .device = kGpu}, stat{.device = kGpu};
  const Tensor x = on_gpu(in.x, dtype), grad_y = on_gpu(in.grad_y, dtype);
  const Tensor gamma = in.gamma.to(kGpu), beta = in.beta.to(kGpu);
  Step s{empty(in.x.shape(), act), empty({c}, stat),        empty({c}, stat),
         in.running_mean.to(kGpu), in.running_var.to(kGpu), empty(in.x.shape(), act),
         empty({c}, stat),         empty({c}, stat)};
  const BatchNormRunning running{s.running_mean, s.running_var, kMomentum};
  if (relu) {
    Tensor no_residual;
    gpu().batch_norm_relu_forward_training(x, no_residual, gamma, beta, running, kEps, s.y, s.mean,
                                           s.inv_std);
    gpu().batch_norm_relu_backward(grad_y, s.y, x, gamma, s.mean, s.inv_std, kEps, s.grad_x,
                                   s.grad_gamma, s.grad_beta, no_residual);
  } else {
    gpu().batch_norm_forward_training(x, gamma, beta, running, kEps, s.y, s.mean, s.inv_std);
    gpu().batch_norm_backward(grad_y, x, gamma, s.mean, s.inv_std, kEps, s.grad_x, s.grad_gamma,
                              s.grad_beta);
  }
  return s;
}

void expect_step_close(const Step& gpu_result, const Step& cpu_result, double tolerance, bool relu,
                       const std::string& what) {
  expect_close(host(gpu_result.y), cpu_result.y, tolerance, what + " y");
  expect_close(host(gpu_result.mean), cpu_result.mean, 1e-4, what + " mean");
  expect_close(host(gpu_result.inv_std), cpu_result.inv_std, 1e-4, what + " inv_std");
  expect_close(host(gpu_result.running_mean), cpu_result.running_mean, 1e-5,
               what + " running_mean");
  expect_close(host(gpu_result.running_var), cpu_result.running_var, 1e-5, what + " running_var");
  expect_close(host(gpu_result.grad_x), cpu_result.grad_x, tolerance, what + " grad_x");
  // Float32 sums of the same values in another order; with the fused ReLU one near-zero y may
  // flip which grad_y count: a looser bound there.
  expect_close(host(gpu_result.grad_gamma), cpu_result.grad_gamma, relu ? 1e-2 : 1e-3,
               what + " grad_gamma");
  expect_close(host(gpu_result.grad_beta), cpu_result.grad_beta, relu ? 1e-2 : 1e-3,
               what + " grad_beta");
}

// Packs of 8 with many chunks per channel (ResNet-20's first stage at batch 128: 33 per channel
// on an H100), one chunk, single values (odd HW), HW = 1, C = 1 and many channels.
const std::vector<Shape> kShapes = {{128, 16, 32, 32}, {32, 16, 16, 16}, {3, 5, 7, 9},
                                    {16, 4, 1, 1},     {64, 1, 5, 5},    {4, 300, 3, 3}};

// Every shape, with and without the fused ReLU, against the CPU; `plain` and `fused` name the
// kernels that run in each case.
void check_training(DType dtype, double tolerance, uint64_t seed, const char* plain,
                    const char* fused) {
  for (const Shape& shape : kShapes) {
    const Inputs in = draw_inputs(shape, seed += 10);
    for (const bool relu : {false, true}) {
      expect_step_close(gpu_step(in, dtype, relu), cpu_step(in, relu), tolerance, relu,
                        std::string(relu ? fused : plain) + " " + shape_str(shape));
    }
  }
}

TEST(BatchNormCudaGpu, BFloat16TrainingMatchesTheCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  check_training(DType::BFloat16, 2 * kBFloat16Tolerance, 100, "bfloat16 batch_norm",
                 "bfloat16 batch_norm_relu");
}

// float32: cuDNN alone, the own kernels with the fused ReLU; both save 1 / sqrt(var + eps) and
// keep the unbiased running variance.
TEST(BatchNormCudaGpu, Float32CudnnAndOwnKernelsMatchTheCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  check_training(DType::Float32, 1e-4, 200, "float32 cuDNN", "float32 own kernels");
}

// No atomics: the same inputs give the same bits on a second run.
TEST(BatchNormCudaGpu, OwnKernelsAreDeterministic) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const Inputs in = draw_inputs({128, 16, 32, 32}, 300);
  const Step first = gpu_step(in, DType::BFloat16, true);
  const Step second = gpu_step(in, DType::BFloat16, true);
  expect_close(host(second.y), host(first.y), 0.0, "y");
  expect_close(host(second.inv_std), host(first.inv_std), 0.0, "inv_std");
  expect_close(host(second.running_var), host(first.running_var), 0.0, "running_var");
  expect_close(host(second.grad_x), host(first.grad_x), 0.0, "grad_x");
  expect_close(host(second.grad_gamma), host(first.grad_gamma), 0.0, "grad_gamma");
}

TEST(BatchNormCudaGpu, BFloat16InferenceMatchesTheCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  for (const Shape& shape : {Shape{8, 16, 9, 9}, Shape{8, 16, 8, 8}}) {
    const Inputs in = draw_inputs(shape, 400);
    Tensor y = empty(shape);
    cpu().batch_norm_forward_inference(in.x, in.gamma, in.beta, in.running_mean, in.running_var,
                                       kEps, y);
    Tensor gy = empty(shape, {.dtype = DType::BFloat16, .device = kGpu});
    gpu().batch_norm_forward_inference(on_gpu(in.x, DType::BFloat16), in.gamma.to(kGpu),
                                       in.beta.to(kGpu), in.running_mean.to(kGpu),
                                       in.running_var.to(kGpu), kEps, gy);
    expect_close(host(gy), y, kBFloat16Tolerance, "batch_norm inference " + shape_str(shape));
  }
}

}  // namespace
}  // namespace tandem
