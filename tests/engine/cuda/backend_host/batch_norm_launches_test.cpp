// What one batch norm queues on a GPU, counted on the fake CUDA runtime and cuDNN (Note [Fake
// CUDA runtime]): the op front-end and the CUDA backend run unmodified, every kernel launch and
// cuDNN call is traced with its arguments, nothing computes. A training forward is one cuDNN
// call (float32) or three kernels (the own kernels, Note [Batch-norm kernels]), the running
// statistics included (Note [Running statistics]); before, their update took nine more launches
// and cuDNN's statistics two conversion kernels.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/tandem.h"
#include "tests/engine/cuda/runtime/fake_cuda_fixture.h"

namespace tandem::fake_cuda {
namespace {

const Device kGpu = Device::cuda(0);

std::string address(const Tensor& t) {
  return std::to_string(reinterpret_cast<uintptr_t>(t.data_ptr()));
}

/// The calls made since `mark` calls had been traced.
std::vector<Call> calls_since(size_t mark) {
  std::vector<Call> all = calls();
  return {all.begin() + static_cast<std::ptrdiff_t>(mark), all.end()};
}

/// Work queued on the device: kernel launches and cuDNN's batch-norm calls, in order.
std::vector<Call> work_of(const std::vector<Call>& trace) {
  std::vector<Call> work;
  for (const Call& call : trace) {
    if (call.function == "cudaLaunchKernel" || call.function.starts_with("cudnnBatchNorm") ||
        call.function.starts_with("cudaMemcpy")) {
      work.push_back(call);
    }
  }
  return work;
}

std::string describe(const std::vector<Call>& work) {
  std::string out;
  for (const Call& call : work) out += "\n  " + call.function + ": " + call.detail;
  return out;
}

/// A batch norm's parameters and running statistics on cuda:0, allocated before counting.
struct Layer {
  explicit Layer(int64_t channels)
      : gamma(empty({channels}, {.device = kGpu})),
        beta(empty({channels}, {.device = kGpu})),
        running_mean(empty({channels}, {.device = kGpu})),
        running_var(empty({channels}, {.device = kGpu})) {}
  Tensor gamma, beta, running_mean, running_var;
};

class BatchNormLaunches : public FakeCudaTest {};

TEST_F(BatchNormLaunches, Float32TrainingIsOneCudnnCallThatMovesTheRunningStatistics) {
  const Tensor x = empty({8, 16, 32, 32}, {.device = kGpu});
  Layer layer(16);
  const size_t mark = calls().size();
  batch_norm2d(x, layer.gamma, layer.beta, layer.running_mean, layer.running_var,
               {.momentum = 0.25f});
  const std::vector<Call> work = work_of(calls_since(mark));
  ASSERT_EQ(work.size(), 1u) << describe(work);
  EXPECT_EQ(work[0].function, "cudnnBatchNormalizationForwardTraining");
  EXPECT_NE(work[0].detail.find("factor 0.25 running_mean " + address(layer.running_mean) +
                                " running_var " + address(layer.running_var)),
            std::string::npos)
      << work[0].detail;
}

TEST_F(BatchNormLaunches, Float32TrainingWithoutRunningStatisticsGivesCudnnNone) {
  const Tensor x = empty({4, 3, 5, 5}, {.device = kGpu});
  Layer layer(3);
  const size_t mark = calls().size();
  batch_norm2d(x, layer.gamma, layer.beta, Tensor(), Tensor());
  const std::vector<Call> work = work_of(calls_since(mark));
  ASSERT_EQ(work.size(), 1u) << describe(work);
  EXPECT_NE(work[0].detail.find("running_mean 0 running_var 0"), std::string::npos)
      << work[0].detail;
}

// ResNet-20's first stage at batch 128: 16 channels of 131072 values, 33 blocks each on the
// fake's 132 multiprocessors, in packs of 8 bfloat16 values; with or without the fused ReLU.
TEST_F(BatchNormLaunches, BFloat16TrainingIsThreeKernelsOverTheWholeGpu) {
  const Tensor x = empty({128, 16, 32, 32}, {.dtype = DType::BFloat16, .device = kGpu});
  Layer layer(16);
  for (const bool relu : {false, true}) {
    const size_t mark = calls().size();
    batch_norm2d(x, layer.gamma, layer.beta, layer.running_mean, layer.running_var,
                 {.fuse_relu = relu});
    const std::vector<Call> work = work_of(calls_since(mark));
    ASSERT_EQ(work.size(), 3u) << describe(work);
    EXPECT_NE(work[0].detail.find("statistics_kernel<8, tandem::BFloat16>"), std::string::npos);
    EXPECT_NE(work[0].detail.find("grid (16, 33, 1) block (256, 1, 1)"), std::string::npos)
        << work[0].detail;
    EXPECT_NE(work[1].detail.find("BatchNormFinalizeBody"), std::string::npos) << work[1].detail;
    EXPECT_NE(work[2].detail.find("normalize_kernel<8, tandem::BFloat16>"), std::string::npos);
    // One pack of 8 values per thread: 2^21 values in 1024 blocks of 256 threads.
    EXPECT_NE(work[2].detail.find("grid (1024, 1, 1)"), std::string::npos) << work[2].detail;
  }
}

// H * W = 63 is no whole number of packs: one value per load, still three kernels.
TEST_F(BatchNormLaunches, BFloat16TrainingOnOddRowsLoadsOneValueAtATime) {
  const Tensor x = empty({5, 3, 7, 9}, {.dtype = DType::BFloat16, .device = kGpu});
  Layer layer(3);
  const size_t mark = calls().size();
  batch_norm2d(x, layer.gamma, layer.beta, layer.running_mean, layer.running_var);
  const std::vector<Call> work = work_of(calls_since(mark));
  ASSERT_EQ(work.size(), 3u) << describe(work);
  EXPECT_NE(work[0].detail.find("statistics_kernel<1, tandem::BFloat16>"), std::string::npos)
      << work[0].detail;
  EXPECT_NE(work[2].detail.find("normalize_kernel<1, tandem::BFloat16>"), std::string::npos)
      << work[2].detail;
}

// cuDNN reads the statistics the forward saved as they are: no conversion kernel before it.
TEST_F(BatchNormLaunches, BackwardIsOneCudnnCallOrThreeKernels) {
  Backend& gpu = backend_for(kGpu);
  for (const DType dtype : {DType::Float32, DType::BFloat16}) {
    const TensorOptions act{.dtype = dtype, .device = kGpu};
    const Tensor x = empty({32, 16, 16, 16}, act), grad_y = empty(x.shape(), act);
    Tensor grad_x = empty(x.shape(), act);
    Layer layer(16);
    Tensor save_mean = empty({16}, {.device = kGpu}), save_inv_std = empty({16}, {.device = kGpu});
    Tensor grad_gamma = empty({16}, {.device = kGpu}), grad_beta = empty({16}, {.device = kGpu});
    const size_t mark = calls().size();
    gpu.batch_norm_backward(grad_y, x, layer.gamma, save_mean, save_inv_std, 1e-5f, grad_x,
                            grad_gamma, grad_beta);
    const std::vector<Call> work = work_of(calls_since(mark));
    if (dtype == DType::Float32) {
      ASSERT_EQ(work.size(), 1u) << describe(work);
      EXPECT_NE(work[0].detail.find("save_mean " + address(save_mean) + " save_inv_variance " +
                                    address(save_inv_std)),
                std::string::npos)
          << work[0].detail;
    } else {
      ASSERT_EQ(work.size(), 3u) << describe(work);
      EXPECT_NE(work[0].detail.find("backward_statistics_kernel<8"), std::string::npos);
      EXPECT_NE(work[1].detail.find("BatchNormBackwardFinalizeBody"), std::string::npos);
      EXPECT_NE(work[2].detail.find("grad_x_kernel<8"), std::string::npos);
    }
  }
}

// batch_norm2d_add_relu: bfloat16 adds the residual in the own kernels' normalize pass (three
// kernels, as batch norm alone); float32 stays on cuDNN, then one add_relu kernel.
TEST_F(BatchNormLaunches, AddReluIsThreeKernelsInBFloat16AndCudnnThenAddReluInFloat32) {
  for (const DType dtype : {DType::Float32, DType::BFloat16}) {
    const TensorOptions act{.dtype = dtype, .device = kGpu};
    const Tensor x = empty({8, 16, 8, 8}, act), residual = empty(x.shape(), act);
    Layer layer(16);
    const size_t mark = calls().size();
    batch_norm2d_add_relu(x, residual, layer.gamma, layer.beta, layer.running_mean,
                          layer.running_var);
    const std::vector<Call> work = work_of(calls_since(mark));
    if (dtype == DType::Float32) {
      ASSERT_EQ(work.size(), 2u) << describe(work);
      EXPECT_EQ(work[0].function, "cudnnBatchNormalizationForwardTraining");
      EXPECT_EQ(work[1].function, "cudaLaunchKernel");
    } else {
      ASSERT_EQ(work.size(), 3u) << describe(work);
      EXPECT_NE(work[2].detail.find("normalize_kernel<8, tandem::BFloat16>"), std::string::npos)
          << work[2].detail;
    }
  }
}

// Evaluation without a graph: no snapshot copies of the running statistics.
TEST_F(BatchNormLaunches, InferenceIsOneCudnnCallOrTwoKernels) {
  NoGradGuard no_grad;
  for (const DType dtype : {DType::Float32, DType::BFloat16}) {
    const Tensor x = empty({16, 32, 8, 8}, {.dtype = dtype, .device = kGpu});
    Layer layer(32);
    const size_t mark = calls().size();
    batch_norm2d(x, layer.gamma, layer.beta, layer.running_mean, layer.running_var,
                 {.training = false});
    const std::vector<Call> work = work_of(calls_since(mark));
    ASSERT_EQ(work.size(), dtype == DType::Float32 ? 1u : 2u) << describe(work);
    if (dtype == DType::BFloat16) {
      EXPECT_NE(work[0].detail.find("BatchNormInvStdBody"), std::string::npos) << work[0].detail;
      EXPECT_NE(work[1].detail.find("normalize_kernel<8"), std::string::npos) << work[1].detail;
    }
  }
}

}  // namespace
}  // namespace tandem::fake_cuda
