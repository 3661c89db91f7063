// bfloat16 and float16 on CUDA: casts, fills and strided copies give the CPU backend's bits.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "engine/tandem.h"
#include "engine/tensor_impl.h"
#include "tests/support/cuda_skip.h"

namespace tandem {
namespace {

// The raw 16-bit patterns of a half tensor, wherever it lives.
std::vector<uint16_t> bits_of(const Tensor& t) {
  const Tensor host = t.to(Device::cpu()).contiguous();
  std::vector<uint16_t> bits(static_cast<size_t>(host.numel()));
  if (!bits.empty()) std::memcpy(bits.data(), host.data_ptr(), host.nbytes());
  return bits;
}

// Ties, subnormals, overflow, NaN, -0: every branch of Note [Half conversions].
Tensor awkward_floats() {
  const float inf = std::numeric_limits<float>::infinity();
  return from_vector<float>({0.1f, -2.75f, 1 + std::ldexp(1.0f, -8), 1 + std::ldexp(1.0f, -11),
                             65504.0f, 65520.0f, 3.0e38f, -inf, std::ldexp(3.0f, -25), 1e-6f,
                             1e-40f, -0.0f, std::numeric_limits<float>::quiet_NaN(), 257.0f},
                            {14});
}

TEST(HalfGpu, CastsMatchTheCpuBitForBit) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  const Tensor floats = awkward_floats();
  for (DType half : {DType::BFloat16, DType::Float16}) {
    const Tensor on_cpu = floats.to(half);
    const Tensor on_gpu = floats.to(gpu).to(half);
    EXPECT_EQ(bits_of(on_gpu), bits_of(on_cpu)) << dtype_name(half);
    const auto widened = on_gpu.to(DType::Float32).to_vector<float>();
    const auto expected = on_cpu.to(DType::Float32).to_vector<float>();
    for (size_t i = 0; i < expected.size(); ++i) {
      if (std::isnan(expected[i])) {
        EXPECT_TRUE(std::isnan(widened[i])) << i;
      } else {
        EXPECT_EQ(widened[i], expected[i]) << i;
      }
    }
    const Tensor ints = from_vector<int64_t>({-3, 257, 2049}, {3}, {.dtype = DType::Int64});
    EXPECT_EQ(ints.to(gpu).to(half).to(DType::Int64).to_vector<int64_t>(),
              ints.to(half).to(DType::Int64).to_vector<int64_t>())
        << dtype_name(half);
    const Tensor bytes = from_vector<uint8_t>({0, 7, 255}, {3}, {.dtype = DType::UInt8});
    EXPECT_EQ(bits_of(bytes.to(gpu).to(half)), bits_of(bytes.to(half))) << dtype_name(half);
    const DType other = half == DType::BFloat16 ? DType::Float16 : DType::BFloat16;
    EXPECT_EQ(bits_of(on_gpu.to(other)), bits_of(on_cpu.to(other))) << dtype_name(half);
  }
}

TEST(HalfGpu, FillAndStridedCopyMatchTheCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  for (DType half : {DType::BFloat16, DType::Float16}) {
    EXPECT_EQ(bits_of(full({7}, 0.1, {.dtype = half, .device = gpu})),
              bits_of(full({7}, 0.1, {.dtype = half})))
        << dtype_name(half);
    const Tensor cpu = awkward_floats().slice(0, 12).view({3, 4}).to(half);
    const Tensor on_gpu = cpu.to(gpu);
    // A transposed view: the gather kernel with 2-byte elements.
    const auto transposed = [](const Tensor& t) {
      return Tensor(std::make_shared<TensorImpl>(t.storage(), Shape{4, 3}, Shape{1, 4}, t.offset(),
                                                 t.dtype()));
    };
    EXPECT_EQ(bits_of(transposed(on_gpu).contiguous()), bits_of(transposed(cpu).contiguous()))
        << dtype_name(half);
  }
}

}  // namespace
}  // namespace tandem
