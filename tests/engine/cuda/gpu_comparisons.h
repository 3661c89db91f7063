#pragma once
// Shared by the GPU op tests (backend_ops_gpu_test.cpp, cuda_backend_gpu_test.cpp): how a CUDA
// result is compared with the CPU's, and the parameter shapes of the model they train.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/tandem.h"

namespace tandem::testing {

// max |actual - expected| <= tolerance * max |expected|, on the host, as double.
inline void expect_close(const Tensor& actual, const Tensor& expected, double tolerance,
                         const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what << " is undefined on CUDA";
  ASSERT_TRUE(expected.defined()) << what << " is undefined on the CPU";
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  const auto a = actual.detach().to(DType::Float32).to_vector<float>();
  const auto e = expected.detach().to(DType::Float32).to_vector<float>();
  double scale = 0.0, worst = 0.0;
  size_t worst_at = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    scale = std::max(scale, std::abs(static_cast<double>(e[i])));
    const double diff = std::abs(static_cast<double>(a[i]) - e[i]);
    if (!(diff <= worst)) {  // NaN on either side counts as the worst
      worst = std::isnan(diff) ? INFINITY : diff;
      worst_at = i;
    }
  }
  EXPECT_LE(worst, tolerance * std::max(scale, 1e-30))
      << what << ": max |cuda - cpu| = " << worst << " at " << worst_at << " (cuda " << a[worst_at]
      << ", cpu " << e[worst_at] << ") for max |cpu| = " << scale;
}

// The parameter shapes of CIFAR ResNet-20 (nn/resnet.h, Note [Shortcut]): 65 tensors, more than
// one multi-tensor SGD launch takes on CUDA.
inline std::vector<Shape> resnet20_parameter_shapes() {
  std::vector<Shape> shapes = {{16, 3, 3, 3}, {16}, {16}};
  int64_t in = 16;
  for (int64_t width : {16, 32, 64}) {
    for (int block = 0; block < 3; ++block) {
      for (const Shape& shape : std::vector<Shape>{
               {width, in, 3, 3}, {width}, {width}, {width, width, 3, 3}, {width}, {width}}) {
        shapes.push_back(shape);
      }
      if (in != width) {
        for (const Shape& shape : std::vector<Shape>{{width, in, 1, 1}, {width}, {width}}) {
          shapes.push_back(shape);
        }
      }
      in = width;
    }
  }
  shapes.push_back({10, 64});
  shapes.push_back({10});
  return shapes;
}

}  // namespace tandem::testing
