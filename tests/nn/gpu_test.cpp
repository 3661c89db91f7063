#include <gtest/gtest.h>

#include "engine/tandem.h"
#include "nn/loss.h"
#include "nn/resnet.h"
#include "tests/support/cuda_skip.h"

namespace tandem::nn {
namespace {

// Suites ending in "Gpu" carry the CTest label "gpu" (tests/CMakeLists.txt).
TEST(ModelsGpu, ResNet20OnCudaMatchesCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  Generator generator(5);
  const auto cpu_model = make_resnet("resnet20", generator);
  const auto cuda_model = cpu_model->clone();
  cuda_model->to(Device::cuda(0));
  const Tensor images = randn({8, 3, 32, 32}, generator);
  const Tensor labels =
      from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7}, {8}, {.dtype = DType::Int64});
  const CrossEntropyLoss loss;
  loss((*cpu_model)(images), labels).backward();
  loss((*cuda_model)(images.to(Device::cuda(0))), labels.to(Device::cuda(0))).backward();
  const NamedTensors a = cpu_model->named_parameters(), b = cuda_model->named_parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    const auto expected = a[i].second.grad().to_vector<float>();
    const auto actual = b[i].second.grad().to_vector<float>();
    for (size_t j = 0; j < expected.size(); ++j) {
      ASSERT_NEAR(actual[j], expected[j], 1e-3f * (1.0f + std::abs(expected[j])))
          << a[i].first << "[" << j << "]";
    }
  }
}

TEST(Models, CrossEntropyLossModuleIsTheFusedOp) {
  const Tensor logits = from_vector<float>({2, 0, 1, 0, 3, 1}, {2, 3});
  const Tensor labels = from_vector<int64_t>({0, 2}, {2}, {.dtype = DType::Int64});
  EXPECT_DOUBLE_EQ(CrossEntropyLoss()(logits, labels).item(), cross_entropy(logits, labels).item());
}

}  // namespace
}  // namespace tandem::nn
