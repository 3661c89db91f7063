#pragma once
/// Comparing results with a reference computed another way. Two rules:
/// - expect_close_to_reference: tensors where only float32 summation order differs (one device
///   against several, one process against several ranks); the largest absolute difference must
///   stay within `relative` × the reference's largest magnitude.
/// - expect_close_elementwise: values against a double-precision reference (tests/support/
///   reference_ops.h); each element on its own must be within `tolerance` × (1 + its magnitude).

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/tensor.h"

namespace tandem::testing {

inline void expect_close_to_reference(const Tensor& actual, const Tensor& expected,
                                      const std::string& what, double relative = 2e-4) {
  ASSERT_TRUE(actual.defined()) << what << " is undefined";
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const std::vector<float> a = actual.to_vector<float>();
  const std::vector<float> e = expected.to_vector<float>();
  double scale = 1e-6, worst = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    scale = std::max(scale, std::abs(static_cast<double>(e[i])));
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - e[i]));
  }
  EXPECT_LE(worst, relative * scale)
      << what << ": max |diff| " << worst << " for max |value| " << scale;
}

/// Stops at the first element out of tolerance, naming it.
inline void expect_close_elementwise(const std::vector<float>& actual,
                                     const std::vector<float>& expected, float tolerance,
                                     const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_NEAR(actual[i], expected[i], tolerance * (1.0f + std::abs(expected[i])))
        << what << " at " << i;
  }
}

}  // namespace tandem::testing
