#include <gtest/gtest.h>

#include "engine/tandem.h"
#include "engine/tensor_impl.h"
#include "tests/support/error_message.h"

namespace tandem {
namespace {

TEST(Tensor, FactoriesFillAndReadBack) {
  const Tensor t = full({2, 3}, 1.5);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.dtype(), DType::Float32);
  EXPECT_EQ(t.to_vector<float>(), std::vector<float>(6, 1.5f));
  EXPECT_EQ(zeros({4}, {.dtype = DType::Int64}).to_vector<int64_t>(), std::vector<int64_t>(4, 0));
}

TEST(Tensor, StorageIsSixtyFourByteAligned) {
  for (int64_t n : {1, 3, 17, 1000}) {
    const Tensor t = empty({n});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64, 0u);
  }
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor v = t.view({3, 2});
  EXPECT_EQ(v.storage(), t.storage());
  EXPECT_EQ(t.view({-1}).shape(), (Shape{6}));
  Tensor row = t.slice(1, 2);
  EXPECT_EQ(row.shape(), (Shape{1, 3}));
  EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{3, 4, 5}));
  row.fill_(9.0);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 1, 2, 9, 9, 9}));
}

// Note [Released storage]: the views keep their shape through release() and see the memory
// restore() brings back; a read in between throws instead of touching freed memory.
TEST(Tensor, ViewsOfAReleasedStorageThrowUntilItIsRestored) {
  Tensor t = from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  const Tensor row = t.slice(1, 2);
  t.storage()->release();
  EXPECT_TRUE(t.storage()->released());
  EXPECT_EQ(row.shape(), (Shape{1, 3}));
  EXPECT_NE(testing::error_message([&] { row.to_vector<float>(); }).find("memory was released"),
            std::string::npos);
  t.storage()->restore();
  t.fill_(2.0);
  EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{2, 2, 2}));
  t.storage()->restore();  // restored already: the data stays
  EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{2, 2, 2}));
}

TEST(Tensor, ContiguousGathersAStridedView) {
  // A transposed view built from explicit strides, as a layout change would make.
  Tensor t = from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor transposed(
      std::make_shared<TensorImpl>(t.storage(), Shape{3, 2}, Shape{1, 3}, 0, DType::Float32));
  EXPECT_FALSE(transposed.is_contiguous());
  EXPECT_EQ(transposed.contiguous().to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Tensor, CopiesBetweenCpuDevicesAreIndependent) {
  Tensor a = from_vector<float>({1, 2, 3}, {3});
  Tensor b = a.to(Device::cpu(1));
  EXPECT_EQ(b.device(), Device::cpu(1));
  EXPECT_NE(b.storage(), a.storage());
  a.fill_(0.0);
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

TEST(Tensor, CastsBetweenDtypes) {
  const Tensor bytes = from_vector<uint8_t>({0, 128, 255}, {3}, {.dtype = DType::UInt8});
  EXPECT_EQ(bytes.to(DType::Float32).to_vector<float>(), (std::vector<float>{0, 128, 255}));
  const Tensor floats = from_vector<float>({1.9f, -2.5f}, {2});
  EXPECT_EQ(floats.to(DType::Int64).to_vector<int64_t>(), (std::vector<int64_t>{1, -2}));
}

TEST(Tensor, FromVectorInfersTheDtypeFromTheValues) {
  // A newcomer's labels (the UX trial of 2026-11-27): integers make an int64 tensor, as
  // torch.tensor([3, 1]) does, without spelling the dtype out.
  const Tensor labels = from_vector(std::vector<int64_t>{3, 1}, {2});
  EXPECT_EQ(labels.dtype(), DType::Int64);
  EXPECT_EQ(labels.to_vector<int64_t>(), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(from_vector(std::vector<uint8_t>{7}, {1}).dtype(), DType::UInt8);
  EXPECT_EQ(from_vector<int64_t>({4}, {1}, {.dtype = DType::Int64}).dtype(), DType::Int64);
  // Another dtype than the values' is refused, never converted.
  EXPECT_THROW(from_vector<int64_t>({4}, {1}, {.dtype = DType::BFloat16}), Error);
  EXPECT_THROW(from_vector<float>({4}, {1}, {.dtype = DType::Int64}), Error);
}

TEST(Tensor, SeededRandomIsReproducible) {
  Generator g1(7), g2(7), g3(8);
  const auto a = randn({100}, g1).to_vector<float>();
  EXPECT_EQ(a, randn({100}, g2).to_vector<float>());
  EXPECT_NE(a, randn({100}, g3).to_vector<float>());
  Generator g4(7);
  const auto u = uniform({1000}, -2.0f, 3.0f, g4).to_vector<float>();
  for (float v : u) {
    EXPECT_GE(v, -2.0f);
    EXPECT_LT(v, 3.0f);
  }
}

TEST(Tensor, GeneratorStateRoundTrips) {
  Generator g(3);
  g.normal();
  const std::string state = g.state();
  const float next = g.normal();
  Generator restored;
  restored.set_state(state);
  EXPECT_EQ(restored.normal(), next);
}

TEST(Tensor, ItemReadsOneElement) {
  EXPECT_DOUBLE_EQ(full({}, 2.5).item(), 2.5);
  EXPECT_THROW(zeros({2}).item(), Error);
}

TEST(Device, ParsesAndPrints) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu(0));
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::cpu(1).str(), "cpu:1");
  EXPECT_THROW(Device::parse("gpu:0"), Error);
  EXPECT_THROW(Device::parse("cuda:x"), Error);
  EXPECT_THROW(Device::parse("cpu:-1"), Error);
}

TEST(Device, CudaWithoutBackendIsAClearError) {
  if (cuda_available()) GTEST_SKIP() << "this build has CUDA";
  try {
    zeros({2}, {.device = Device::cuda(0)});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[cuda]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem
