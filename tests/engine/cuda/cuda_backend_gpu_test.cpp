// The CUDA backend on what the op table of backend_ops_gpu_test.cpp cannot express: in-place ops,
// state updates, dtypes, copies between devices (a suite of its own: gtest keeps one fixture class
// per suite). Each test skips without a GPU.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/tandem.h"
#include "tests/engine/cuda/gpu_comparisons.h"
#include "tests/support/cuda_skip.h"

namespace tandem {
namespace {

using testing::expect_close;
using testing::resnet20_parameter_shapes;

TEST(CudaBackendGpu, FillAndCastEveryDtype) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  EXPECT_EQ(full({5}, -2.75, {.device = gpu}).to_vector<float>(), std::vector<float>(5, -2.75f));
  EXPECT_EQ(full({3}, -7, {.dtype = DType::Int64, .device = gpu}).to_vector<int64_t>(),
            std::vector<int64_t>(3, -7));
  EXPECT_EQ(full({4}, 200, {.dtype = DType::UInt8, .device = gpu}).to_vector<uint8_t>(),
            std::vector<uint8_t>(4, 200));
  const Tensor bytes = from_vector<uint8_t>({0, 7, 255}, {3}, {.dtype = DType::UInt8});
  EXPECT_EQ(bytes.to(gpu).to(DType::Float32).to_vector<float>(),
            (std::vector<float>{0.0f, 7.0f, 255.0f}));
  const Tensor floats = from_vector<float>({-2.7f, 2.7f, 0.2f}, {3}, {.device = gpu});
  EXPECT_EQ(floats.to(DType::Int64).to_vector<int64_t>(), (std::vector<int64_t>{-2, 2, 0}));
}

TEST(CudaBackendGpu, InPlaceAddAccumulates) {
  TANDEM_SKIP_WITHOUT_CUDA();
  Generator generator(3);
  const Tensor a = randn({6, 5}, generator), b = randn({6, 5}, generator);
  Tensor on_cpu = a.clone();
  Tensor on_gpu = a.to(Device::cuda(0));
  add_(on_cpu, b);
  add_(on_gpu, b.to(Device::cuda(0)));
  expect_close(on_gpu, on_cpu, 0.0, "add_");
}

TEST(CudaBackendGpu, InPlaceScalarAddCountsInInt64) {
  TANDEM_SKIP_WITHOUT_CUDA();
  Tensor on_cpu = full({3}, 1e12, {.dtype = DType::Int64});
  Tensor on_gpu = on_cpu.to(Device::cuda(0));
  add_(on_cpu, 1.0);
  add_(on_gpu, 1.0);
  EXPECT_EQ(on_gpu.to_vector<int64_t>(), on_cpu.to_vector<int64_t>());
  EXPECT_EQ(on_gpu.to_vector<int64_t>()[0], 1000000000001);
}

TEST(CudaBackendGpu, BatchNormUpdatesRunningStatisticsLikeCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  Generator generator(4);
  const Tensor x = randn({8, 4, 3, 3}, generator, {}, 1.0f, 2.0f);
  Tensor mean_cpu = zeros({4}), var_cpu = ones({4});
  Tensor mean_gpu = mean_cpu.to(gpu), var_gpu = var_cpu.to(gpu);
  for (int step = 0; step < 3; ++step) {
    batch_norm2d(x, Tensor(), Tensor(), mean_cpu, var_cpu);
    batch_norm2d(x.to(gpu), Tensor(), Tensor(), mean_gpu, var_gpu);
  }
  expect_close(mean_gpu, mean_cpu, 1e-5, "running_mean");
  expect_close(var_gpu, var_cpu, 1e-5, "running_var");
}

TEST(CudaBackendGpu, SgdStepsMatchCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  const SgdStepOptions variants[] = {
      {.lr = 0.1f},
      {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f},
      {.lr = 0.05f, .momentum = 0.9f, .dampening = 0.1f, .weight_decay = 1e-4f, .nesterov = true},
  };
  for (const SgdStepOptions& variant : variants) {
    Generator generator(5);
    Tensor param_cpu = randn({33, 7}, generator);
    Tensor param_gpu = param_cpu.to(gpu);
    Tensor buffer_cpu = zeros({33, 7}), buffer_gpu = zeros({33, 7}, {.device = gpu});
    for (int step = 0; step < 3; ++step) {
      const Tensor grad = randn({33, 7}, generator);
      SgdStepOptions options = variant;
      options.first_step = step == 0;
      sgd_step(param_cpu, grad, buffer_cpu, options);
      sgd_step(param_gpu, grad.to(gpu), buffer_gpu, options);
    }
    expect_close(param_gpu, param_cpu, 1e-6, "param");
    if (variant.momentum != 0.0f) expect_close(buffer_gpu, buffer_cpu, 1e-6, "momentum buffer");
  }
}

// The fused kernel against the per-tensor one on the same GPU: the same __device__ update, so
// the same bits, over more tensors than one launch takes and a tensor of many element ranges.
TEST(CudaBackendGpu, SgdMultiEqualsPerTensorSteps) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  std::vector<Shape> shapes = resnet20_parameter_shapes();
  shapes.push_back({1 << 20});
  Generator generator(8);
  std::vector<Tensor> params, buffers;
  std::vector<SgdTensors> multi;
  for (const Shape& shape : shapes) {
    const Tensor p = randn(shape, generator).to(gpu);
    params.push_back(p.clone());
    buffers.push_back(zeros(shape, {.device = gpu}));
    multi.push_back({p.clone(), Tensor(), zeros(shape, {.device = gpu})});
  }
  const SgdStepOptions variant{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f};
  for (int step = 0; step < 3; ++step) {
    SgdStepOptions options = variant;
    options.first_step = step == 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      multi[i].grad = randn(shapes[i], generator).to(gpu);
      sgd_step(params[i], multi[i].grad, buffers[i], options);
    }
    sgd_step_multi(multi, options);
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    SCOPED_TRACE("tensor " + std::to_string(i));
    expect_close(multi[i].param, params[i], 0.0, "param");
    expect_close(multi[i].momentum_buffer, buffers[i], 0.0, "momentum buffer");
  }
}

TEST(CudaBackendGpu, CopiesBetweenHostAndDeviceKeepEveryByte) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  std::vector<int64_t> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int64_t>(i * i) - 12345;
  const Tensor host = from_vector(values, {10, 100}, {.dtype = DType::Int64});
  const Tensor device = host.to(gpu);
  EXPECT_EQ(device.to_vector<int64_t>(), values);
  // A strided host view goes up through a contiguous staging copy.
  EXPECT_EQ(expand(from_vector<float>({1, 2}, {2, 1}), {2, 3}).to(gpu).to_vector<float>(),
            (std::vector<float>{1, 1, 1, 2, 2, 2}));
}

TEST(CudaBackendGpu, CopyBetweenTwoDevices) {
  TANDEM_SKIP_WITHOUT_CUDA();
  if (cuda_runtime().device_count() < 2) GTEST_SKIP() << "needs two CUDA devices";
  Generator generator(6);
  const Tensor host = randn({64, 33}, generator);
  const Tensor on_1 = host.to(Device::cuda(0)).to(Device::cuda(1));
  ASSERT_EQ(on_1.device(), Device::cuda(1));
  expect_close(on_1, host, 0.0, "cuda:0 -> cuda:1");
  expect_close(relu(on_1).to(Device::cuda(0)), relu(host), 0.0, "cuda:1 -> cuda:0");
}

}  // namespace
}  // namespace tandem
