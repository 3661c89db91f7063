#pragma once
/// Comparing a tensor with a reference computed another way (one device against several, one
/// process against several ranks), where only float32 summation order differs: the largest
/// absolute difference must stay within `relative` × the reference's largest magnitude.

#include <algorithm>
#include <cmath>
#include <string>

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

}  // namespace tandem::testing
