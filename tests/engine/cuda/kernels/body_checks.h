#pragma once
// Shared by the kernel-body tests: the CPU backend that the bodies are compared with, random
// inputs, and comparisons that name the failing element.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/tandem.h"

namespace tandem::testing {

inline Backend& cpu() {
  return backend_for(Device::cpu());
}

/// Uniform values in [low, high) of `shape`, float32 on the CPU.
inline Tensor random_tensor(const Shape& shape, uint64_t seed, float low = -2.0f,
                            float high = 2.0f) {
  Generator generator(seed);
  return uniform(shape, low, high, generator);
}

/// A uniform integer in [low, high].
inline int64_t random_int(std::mt19937_64& random, int64_t low, int64_t high) {
  return std::uniform_int_distribution<int64_t>(low, high)(random);
}

/// Every element of actual within `relative` × max(1, |expected|) of expected.
inline void expect_all_near(const std::vector<float>& actual, const std::vector<float>& expected,
                            double relative, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double tolerance = relative * std::max(1.0, std::abs(static_cast<double>(expected[i])));
    ASSERT_NEAR(actual[i], expected[i], tolerance) << what << ", element " << i;
  }
}

/// Bit for bit (NaN payloads included).
template <typename T>
void expect_all_equal(const std::vector<T>& actual, const std::vector<T>& expected,
                      const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_EQ(std::memcmp(&actual[i], &expected[i], sizeof(T)), 0)
        << what << ", element " << i << ": " << actual[i] << " vs " << expected[i];
  }
}

/// Note [bfloat16 body checks]: a bfloat16 body is checked against the float32 CPU backend run
/// on the same bfloat16-rounded inputs, widened: what the body computes, save that it rounds
/// each output once to bfloat16 (and may sum in another order). So an output is exact where the
/// float32 result is a plain function of one input or two, and otherwise within a bfloat16 ulp
/// or two: kBFloat16Tolerance, relative to max(1, |expected|).
constexpr double kBFloat16Tolerance = 1.0 / 128;

/// The values of a float32 tensor rounded to bfloat16 (Note [Half conversions]).
inline std::vector<BFloat16> to_bfloat16(const Tensor& t) {
  std::vector<BFloat16> out;
  for (const float v : t.to_vector<float>()) out.emplace_back(v);
  return out;
}

/// The bfloat16 values widened to float32 (exact), as a CPU tensor of `shape`.
inline Tensor widened(const std::vector<BFloat16>& values, const Shape& shape) {
  std::vector<float> wide(values.begin(), values.end());
  return from_vector(wide, shape);
}
inline std::vector<float> widened(const std::vector<BFloat16>& values) {
  return {values.begin(), values.end()};
}

/// A float32 tensor rounded to bfloat16 and widened back: the inputs the reference sees.
inline Tensor rounded_to_bfloat16(const Tensor& t) {
  return widened(to_bfloat16(t), t.shape());
}

/// Bit for bit: each bfloat16 output is the float32 result rounded once.
inline void expect_rounded_equal(const std::vector<BFloat16>& actual,
                                 const std::vector<float>& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_EQ(actual[i].bits, BFloat16(expected[i]).bits)
        << what << ", element " << i << ": " << static_cast<float>(actual[i]) << " vs "
        << expected[i];
  }
}

}  // namespace tandem::testing
