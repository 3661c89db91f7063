#include <gtest/gtest.h>

#include "engine/tandem.h"
#include "tests/support/error_message.h"
#include "tests/support/gradcheck.h"

namespace tandem {
namespace {

TEST(Cat, JoinsRowsInOrder) {
  Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector<float>({5, 6}, {1, 2});
  Tensor c = cat({a, b});
  EXPECT_EQ(c.shape(), (Shape{3, 2}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(Cat, GradientMatchesFiniteDifferences) {
  Generator generator(5);
  Tensor a = randn({2, 3, 2}, generator).set_requires_grad(true);
  Tensor b = randn({1, 3, 2}, generator);  // no grad: its slot stays empty
  Tensor c = randn({3, 3, 2}, generator).set_requires_grad(true);
  EXPECT_TRUE(testing::check_gradients(
      [](const std::vector<Tensor>& in) {
        return cat({in[0], in[1], in[2]});
      },
      {a, b, c}));
}

TEST(Cat, RejectsMismatchedTensors) {
  EXPECT_NE(testing::error_message([] {
              cat({zeros({2, 3}), zeros({2, 4})});
            }).find("[cat] tensor 1 has shape [2, 4]"),
            std::string::npos);
  EXPECT_NE(testing::error_message([] {
              cat({zeros({2}), zeros({2}, {.device = Device::cpu(1)})});
            }).find("on cpu:1"),
            std::string::npos);
  EXPECT_NE(testing::error_message([] { cat({}); }).find("[cat] needs at least one tensor"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem
