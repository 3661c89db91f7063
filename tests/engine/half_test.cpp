// bfloat16 and float16: the conversions of engine/half.h (Note [Half conversions]) and the
// storage operations of the CPU backend (casts, fills, strided copies, item). Compute ops refuse
// them.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "engine/tandem.h"
#include "engine/tensor_impl.h"
#include "tests/support/error_message.h"

namespace tandem {
namespace {

using testing::error_message;

uint16_t bf16(float value) {
  return BFloat16(value).bits;
}
uint16_t fp16(float value) {
  return Float16(value).bits;
}
float pow2(int exponent) {
  return std::ldexp(1.0f, exponent);
}

// float16's value from its fields, written independently of half.h's bit manipulation.
double float16_value(uint16_t bits) {
  const double sign = (bits & 0x8000) != 0 ? -1.0 : 1.0;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 0x1f) return mantissa == 0 ? sign * HUGE_VAL : std::nan("");
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

template <typename Half>
std::vector<uint16_t> bits_of(const Tensor& t) {
  std::vector<uint16_t> bits;
  for (Half h : t.to_vector<Half>()) bits.push_back(h.bits);
  return bits;
}

// --- conversions

TEST(Half, DTypeTable) {
  EXPECT_STREQ(dtype_name(DType::BFloat16), "bfloat16");
  EXPECT_STREQ(dtype_name(DType::Float16), "float16");
  EXPECT_EQ(dtype_size(DType::BFloat16), 2u);
  EXPECT_EQ(dtype_size(DType::Float16), 2u);
  EXPECT_EQ(DTypeOf<BFloat16>::value, DType::BFloat16);
  EXPECT_EQ(DTypeOf<Float16>::value, DType::Float16);
}

TEST(Half, EveryBFloat16PatternRoundTripsThroughFloat) {
  int nans = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    const float value = BFloat16::from_bits(static_cast<uint16_t>(b));
    uint32_t float_bits;
    std::memcpy(&float_bits, &value, 4);
    ASSERT_EQ(float_bits, b << 16) << b;  // bfloat16 is float's top half
    if (std::isnan(value)) {
      ++nans;
      ASSERT_TRUE(std::isnan(static_cast<float>(BFloat16(value)))) << b;
    } else {
      ASSERT_EQ(bf16(value), b) << b;
    }
  }
  EXPECT_EQ(nans, 2 * 127);  // exponent all ones, mantissa non-zero, either sign
}

TEST(Half, EveryFloat16PatternRoundTripsThroughFloat) {
  int nans = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float value = Float16::from_bits(bits);
    if (std::isnan(value)) {
      ++nans;
      ASSERT_TRUE(std::isnan(float16_value(bits))) << b;
      ASSERT_TRUE(std::isnan(static_cast<float>(Float16(value)))) << b;
    } else {
      ASSERT_EQ(static_cast<double>(value), float16_value(bits)) << b;
      ASSERT_EQ(std::signbit(value), (b & 0x8000) != 0) << b;
      ASSERT_EQ(fp16(value), b) << b;
    }
  }
  EXPECT_EQ(nans, 2 * 1023);
}

TEST(Half, TiesRoundToEven) {
  // bfloat16 keeps 7 fraction bits: 1 + 2^-8 is halfway between 1 (even) and 1 + 2^-7 (odd).
  EXPECT_EQ(bf16(1 + pow2(-8)), 0x3f80);
  EXPECT_EQ(bf16(1 + 3 * pow2(-8)), 0x3f82);          // between 0x3f81 (odd) and 0x3f82 (even)
  EXPECT_EQ(bf16(1 + pow2(-8) + pow2(-20)), 0x3f81);  // just past the tie
  EXPECT_EQ(bf16(1 + pow2(-8) - pow2(-20)), 0x3f80);  // just short of it
  EXPECT_EQ(bf16(-(1 + pow2(-8))), 0xbf80);
  EXPECT_EQ(bf16(-(1 + 3 * pow2(-8))), 0xbf82);
  // float16 keeps 10 fraction bits.
  EXPECT_EQ(fp16(1 + pow2(-11)), 0x3c00);
  EXPECT_EQ(fp16(1 + 3 * pow2(-11)), 0x3c02);
  EXPECT_EQ(fp16(1 + pow2(-11) + pow2(-20)), 0x3c01);
  EXPECT_EQ(fp16(-(1 + 3 * pow2(-11))), 0xbc02);
  EXPECT_EQ(fp16(2049), 0x6800);  // 2048 (even), not 2050
  EXPECT_EQ(fp16(2051), 0x6802);  // 2052 (even), not 2050
  // ... and among subnormals, in units of 2^-24.
  EXPECT_EQ(fp16(pow2(-25)), 0x0000);      // 0.5: to 0
  EXPECT_EQ(fp16(3 * pow2(-25)), 0x0002);  // 1.5: to 2
  EXPECT_EQ(fp16(5 * pow2(-25)), 0x0002);  // 2.5: to 2
  EXPECT_EQ(fp16(7 * pow2(-25)), 0x0004);  // 3.5: to 4
}

TEST(Half, OverflowGoesToInfinityAndMaxFiniteValuesStay) {
  const float float_max = std::numeric_limits<float>::max();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bf16(inf), 0x7f80);
  EXPECT_EQ(bf16(-inf), 0xff80);
  EXPECT_EQ(static_cast<float>(BFloat16::from_bits(0x7f7f)), 0x1.fep127f);  // largest finite
  EXPECT_EQ(bf16(0x1.fep127f), 0x7f7f);
  EXPECT_EQ(bf16(0x1.fefffep127f), 0x7f7f);  // below the midpoint to 2^128
  EXPECT_EQ(bf16(0x1.ffp127f), 0x7f80);      // the midpoint: the tie goes to even, inf
  EXPECT_EQ(bf16(float_max), 0x7f80);
  EXPECT_EQ(bf16(-float_max), 0xff80);

  EXPECT_EQ(static_cast<float>(Float16::from_bits(0x7bff)), 65504.0f);
  EXPECT_EQ(fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp16(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(fp16(65520.0f), 0x7c00);  // halfway between 65504 (odd) and 65536: inf
  EXPECT_EQ(fp16(-65520.0f), 0xfc00);
  EXPECT_EQ(fp16(1e10f), 0x7c00);
  EXPECT_EQ(fp16(inf), 0x7c00);
  EXPECT_EQ(fp16(-inf), 0xfc00);
}

TEST(Half, Float16SubnormalBoundaries) {
  EXPECT_EQ(static_cast<float>(Float16::from_bits(0x0001)), pow2(-24));  // smallest subnormal
  EXPECT_EQ(static_cast<float>(Float16::from_bits(0x03ff)), 1023 * pow2(-24));  // largest
  EXPECT_EQ(static_cast<float>(Float16::from_bits(0x0400)), pow2(-14));         // smallest normal
  EXPECT_EQ(fp16(pow2(-24)), 0x0001);
  EXPECT_EQ(fp16(-pow2(-24)), 0x8001);
  EXPECT_EQ(fp16(1023 * pow2(-24)), 0x03ff);
  EXPECT_EQ(fp16(pow2(-14)), 0x0400);
  EXPECT_EQ(fp16(1023.5f * pow2(-24)), 0x0400);  // tie between 0x03ff (odd) and 0x0400
  EXPECT_EQ(fp16(std::nextafter(1023.5f * pow2(-24), 0.0f)), 0x03ff);
  EXPECT_EQ(fp16(std::nextafter(pow2(-25), 1.0f)), 0x0001);  // just past half the smallest
  EXPECT_EQ(fp16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(fp16(-std::numeric_limits<float>::denorm_min()), 0x8000);
}

TEST(Half, NaNStaysNaNAndNegativeZeroKeepsItsSign) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(nan))));
  EXPECT_TRUE(std::isnan(static_cast<float>(Float16(nan))));
  // NaNs whose payload lies only in the bits that are dropped: truncation would give inf.
  float low_payload;
  const uint32_t low_payload_bits = 0x7f800001;
  std::memcpy(&low_payload, &low_payload_bits, 4);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(low_payload))));
  EXPECT_TRUE(std::isnan(static_cast<float>(Float16(low_payload))));
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(-low_payload))));
  EXPECT_EQ(bf16(-0.0f), 0x8000);
  EXPECT_EQ(fp16(-0.0f), 0x8000);
  EXPECT_TRUE(std::signbit(static_cast<float>(BFloat16::from_bits(0x8000))));
  EXPECT_TRUE(std::signbit(static_cast<float>(Float16::from_bits(0x8000))));
}

TEST(Half, MatchesPyTorch) {
  // Reference bit patterns from torch 1.13: torch.tensor(x).to(torch.bfloat16).view(torch.int16)
  // (and torch.float16 likewise), x a Python float rounded to float32 first.
  struct Case {
    float value;
    uint16_t bfloat16, float16;
  };
  const Case cases[] = {
      {1.0f, 0x3f80, 0x3c00},     {3.14159265f, 0x4049, 0x4248}, {1.0f / 3, 0x3eab, 0x3555},
      {-2.5e-3f, 0xbb24, 0x991f}, {1e-6f, 0x3586, 0x0011},       {65504.0f, 0x4780, 0x7bff},
      {70000.0f, 0x4789, 0x7c00}, {3.0e38f, 0x7f62, 0x7c00},     {-0.0f, 0x8000, 0x8000},
      {1e-40f, 0x0001, 0x0000},   {0.1f, 0x3dcd, 0x2e66},        {-123.456f, 0xc2f7, 0xd7b7},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(bf16(c.value), c.bfloat16) << c.value;
    EXPECT_EQ(fp16(c.value), c.float16) << c.value;
  }
}

// --- tensors on the CPU

TEST(HalfTensor, CastsRoundTripThroughTo) {
  const std::vector<float> values = {0.1f, -2.75f, 65504.0f, 1e-6f, 3.0e38f, -0.0f, 1.0f / 3};
  const Tensor floats = from_vector(values, {7});
  const Tensor as_bf16 = floats.to(DType::BFloat16);
  const Tensor as_fp16 = floats.to(DType::Float16);
  EXPECT_EQ(as_bf16.dtype(), DType::BFloat16);
  const std::vector<uint16_t> expected_bf16 = {0x3dcd, 0xc030, 0x4780, 0x3586,
                                               0x7f62, 0x8000, 0x3eab};
  const std::vector<uint16_t> expected_fp16 = {0x2e66, 0xc180, 0x7bff, 0x0011,
                                               0x7c00, 0x8000, 0x3555};
  EXPECT_EQ(bits_of<BFloat16>(as_bf16), expected_bf16);
  EXPECT_EQ(bits_of<Float16>(as_fp16), expected_fp16);
  const std::vector<float> back = as_bf16.to(DType::Float32).to_vector<float>();
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(back[i], static_cast<float>(BFloat16(values[i]))) << i;
  }
  // Half to half goes through float, rounding what the first type kept (values from torch 1.13).
  EXPECT_EQ(bits_of<BFloat16>(as_fp16.to(DType::BFloat16)),
            (std::vector<uint16_t>{0x3dcd, 0xc030, 0x4780, 0x3588, 0x7f80, 0x8000, 0x3eab}));
  EXPECT_EQ(bits_of<Float16>(as_bf16.to(DType::Float16)),
            (std::vector<uint16_t>{0x2e68, 0xc180, 0x7c00, 0x0011, 0x7c00, 0x8000, 0x3558}));
}

TEST(HalfTensor, IntegerCastsGoThroughFloat) {
  const Tensor ints =
      from_vector<int64_t>({-3, 0, 7, 256, 257, 2049}, {6}, {.dtype = DType::Int64});
  // 257 is a bfloat16 tie (to 256); 2049 a bfloat16 (to 2048) and a float16 one (to 2048).
  EXPECT_EQ(ints.to(DType::BFloat16).to(DType::Int64).to_vector<int64_t>(),
            (std::vector<int64_t>{-3, 0, 7, 256, 256, 2048}));
  EXPECT_EQ(ints.to(DType::Float16).to(DType::Int64).to_vector<int64_t>(),
            (std::vector<int64_t>{-3, 0, 7, 256, 257, 2048}));
  const Tensor halves = from_vector<float>({-2.75f, 2.75f, 0.5f}, {3}).to(DType::Float16);
  EXPECT_EQ(halves.to(DType::Int64).to_vector<int64_t>(), (std::vector<int64_t>{-2, 2, 0}));
  const Tensor bytes = from_vector<uint8_t>({0, 7, 255}, {3}, {.dtype = DType::UInt8});
  EXPECT_EQ(bytes.to(DType::BFloat16).to(DType::UInt8).to_vector<uint8_t>(),
            (std::vector<uint8_t>{0, 7, 255}));
  EXPECT_EQ(bytes.to(DType::Float16).to_vector<Float16>()[2].bits, 0x5bf8);  // 255
}

TEST(HalfTensor, FillWritesTheRoundedBitPattern) {
  Tensor t = full({2, 3}, 0.1, {.dtype = DType::BFloat16});
  EXPECT_EQ(bits_of<BFloat16>(t), std::vector<uint16_t>(6, 0x3dcd));
  t.fill_(-65520.0);
  EXPECT_EQ(bits_of<BFloat16>(t), std::vector<uint16_t>(6, 0xc780));
  Tensor h = full({5}, 65520.0, {.dtype = DType::Float16});
  EXPECT_EQ(bits_of<Float16>(h), std::vector<uint16_t>(5, 0x7c00));
  h.zero_();
  EXPECT_EQ(bits_of<Float16>(h), std::vector<uint16_t>(5, 0x0000));
  EXPECT_EQ(bits_of<Float16>(ones({2}, {.dtype = DType::Float16})),
            std::vector<uint16_t>(2, 0x3c00));
}

TEST(HalfTensor, StridedViewsCopyEveryElement) {
  std::vector<BFloat16> values;
  for (int i = 0; i < 6; ++i) values.push_back(BFloat16(static_cast<float>(i) + 0.5f));
  const Tensor t = from_vector(values, {2, 3}, {.dtype = DType::BFloat16});
  // Transposed (inner stride 3) and a column slice (inner stride 1, offset 1).
  const Tensor transposed(
      std::make_shared<TensorImpl>(t.storage(), Shape{3, 2}, Shape{1, 3}, 0, DType::BFloat16));
  const Tensor columns(
      std::make_shared<TensorImpl>(t.storage(), Shape{2, 2}, Shape{3, 1}, 1, DType::BFloat16));
  const auto as_floats = [](const Tensor& x) { return x.to(DType::Float32).to_vector<float>(); };
  EXPECT_EQ(as_floats(transposed.contiguous()),
            (std::vector<float>{0.5f, 3.5f, 1.5f, 4.5f, 2.5f, 5.5f}));
  EXPECT_EQ(as_floats(columns.contiguous()), (std::vector<float>{1.5f, 2.5f, 4.5f, 5.5f}));
  EXPECT_EQ(as_floats(cat({t, t.slice(0, 1)})),
            (std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 0.5f, 1.5f, 2.5f}));

  // Channels-last and back, through copy_ of a strided float16 destination.
  std::vector<float> ramp(24);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<float>(i);
  const Tensor x = from_vector(ramp, {1, 2, 3, 4}).to(DType::Float16);
  const Tensor nhwc = x.contiguous(MemoryFormat::ChannelsLast);
  EXPECT_TRUE(nhwc.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_EQ(bits_of<Float16>(nhwc.contiguous()), bits_of<Float16>(x));
}

TEST(HalfTensor, ItemWidensToDouble) {
  EXPECT_EQ(full({}, 2.5, {.dtype = DType::BFloat16}).item(), 2.5);
  EXPECT_EQ(full({1}, 0.1, {.dtype = DType::BFloat16}).item(),
            static_cast<double>(0x1.9ap-4f));  // 0x3dcd
  EXPECT_EQ(full({1, 1}, 65504, {.dtype = DType::Float16}).item(), 65504.0);
  EXPECT_EQ(full({}, 1e-6, {.dtype = DType::Float16}).item(), 17 * std::ldexp(1.0, -24));
}

TEST(HalfTensor, ComputeOpsRefuseThemClearly) {
  const Tensor a = ones({2, 2}, {.dtype = DType::BFloat16});
  const Tensor h = ones({2, 2}, {.dtype = DType::Float16});
  const Tensor f = ones({2, 2});
  const auto says = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  // bfloat16 is an activation type for a few ops (tests/engine/bf16_ops_test.cpp); the rest
  // refuse it, and add refuses a mix of it with float32.
  const std::string multiplied = error_message([&] { mul(a, f); });
  EXPECT_TRUE(says(multiplied, "[mul] a is bfloat16, expected float32")) << multiplied;
  EXPECT_TRUE(says(multiplied, ".to(DType::Float32)")) << multiplied;
  EXPECT_TRUE(says(error_message([&] { add(a, f); }), "[add] a is bfloat16 but b is float32"));
  EXPECT_TRUE(says(error_message([&] { mul(f, h); }), "[mul] b is float16, expected float32"));
  EXPECT_TRUE(says(error_message([&] { matmul(a, f); }), "[matmul] a is bfloat16"));
  EXPECT_TRUE(says(error_message([&] { matmul(f, h); }), "[matmul] b is float16"));
  EXPECT_TRUE(says(error_message([&] { sum(h); }), "[sum] input is float16"));
  EXPECT_TRUE(says(error_message([&] { exp(a); }), "[exp] input is bfloat16"));
  EXPECT_TRUE(says(error_message([&] { relu(h); }), "[relu] input is float16"));
  Tensor leaf = ones({2}, {.dtype = DType::Float16});
  EXPECT_TRUE(says(error_message([&] { leaf.set_requires_grad(true); }),
                   "[set_requires_grad] only float32 and bfloat16 tensors can require gradients, "
                   "got float16"));
  EXPECT_TRUE(says(error_message([&] { a.to_vector<float>(); }),
                   "[to_vector] tensor is bfloat16, asked for float32"));
}

}  // namespace
}  // namespace tandem
