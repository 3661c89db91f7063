#include <gtest/gtest.h>

#include "engine/tandem.h"
#include "tests/support/gradcheck.h"

namespace tandem {
namespace {

using testing::check_gradients;
using Inputs = std::vector<Tensor>;

Tensor arange_tensor(const Shape& shape) {
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  return from_vector(values, shape);
}

Tensor param(const Shape& shape, uint64_t seed) {
  Generator generator(seed);
  return randn(shape, generator).set_requires_grad(true);
}

TEST(Reduce, SumOverChosenDims) {
  const Tensor x = arange_tensor({2, 3, 4});
  EXPECT_DOUBLE_EQ(sum(x).item(), 276.0);
  EXPECT_EQ(sum(x, {0}).to_vector<float>(),
            (std::vector<float>{12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34}));
  EXPECT_EQ(sum(x, {-1}).to_vector<float>(), (std::vector<float>{6, 22, 38, 54, 70, 86}));
  // Per-channel sum over (N, H, W) of an (N, C, H, W)-like layout.
  const Tensor y = sum(x, {0, 2}, true);
  EXPECT_EQ(y.shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{60, 92, 124}));
}

TEST(Reduce, MeanAndSumTo) {
  const Tensor x = arange_tensor({2, 3});
  EXPECT_DOUBLE_EQ(mean(x).item(), 2.5);
  EXPECT_EQ(mean(x, {1}).to_vector<float>(), (std::vector<float>{1, 4}));
  EXPECT_EQ(sum_to(x, {3}).to_vector<float>(), (std::vector<float>{3, 5, 7}));
  EXPECT_EQ(sum_to(x, {2, 1}).to_vector<float>(), (std::vector<float>{3, 12}));
  EXPECT_THROW(sum_to(x, {4}), Error);
}

TEST(Reduce, SumOfManyElementsIsAccurate) {
  // A float accumulator drifts by ~0.2 here; the kernel accumulates in double.
  EXPECT_NEAR(sum(full({1000, 1000}, 0.1)).item(), 100000.0, 0.01);
}

TEST(Reduce, ArgmaxPicksFirstMaximum) {
  const Tensor x = from_vector<float>({1, 3, 3, 0, -1, -2, -1, -5}, {2, 4});
  EXPECT_EQ(argmax(x).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
}

TEST(ReduceGrad, SumAndMean) {
  const Tensor x = param({2, 3, 4}, 1);
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return sum(in[0], {0, 2}); }, {x}));
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return sum(in[0], {1}, true); }, {x}));
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return mean(in[0], {2}); }, {x}));
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return mean(in[0]); }, {x}));
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return sum_to(in[0], {3, 1}); }, {x}));
}

TEST(ShapeGrad, ViewReshapeFlattenSlice) {
  const Tensor x = param({4, 3, 2}, 2);
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return in[0].view({2, -1}); }, {x}));
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return in[0].flatten(); }, {x}));
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return in[0].slice(1, 3) * 2.0f; }, {x}));
  EXPECT_TRUE(check_gradients([](const Inputs& in) { return in[0].clone(); }, {x}));
}

TEST(ShapeGrad, DeviceCopy) {
  const Tensor x = param({3, 2}, 3);
  EXPECT_TRUE(check_gradients(
      [](const Inputs& in) { return in[0].to(Device::cpu(1)).to(Device::cpu(0)) * 3.0f; }, {x}));
}

TEST(ShapeGrad, SlicesOfOneTensorOnTwoDevicesSumBack) {
  // DataParallel's scatter: rows to different devices, gradients meet in the source.
  const Tensor x = param({4, 2}, 4);
  const auto scatter_and_square = [](const Inputs& in) {
    Tensor top = in[0].slice(0, 2).to(Device::cpu(1));
    Tensor bottom = in[0].slice(2, 4).to(Device::cpu(2));
    return add(sum(top * top).to(Device::cpu(0)), sum(bottom * 3.0f).to(Device::cpu(0)));
  };
  EXPECT_TRUE(check_gradients(scatter_and_square, {x}));
}

TEST(Shape, ErrorsNameTheOpAndShapes) {
  const Tensor x = zeros({2, 3});
  try {
    x.view({4, 2});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[view] cannot view [2, 3]"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(x.slice(1, 3), Error);
  EXPECT_THROW(x.view({-1, -1}), Error);
  EXPECT_THROW(x.flatten(2), Error);
}

}  // namespace
}  // namespace tandem
