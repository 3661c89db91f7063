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

}  // namespace tandem::testing
