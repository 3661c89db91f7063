#include <gtest/gtest.h>

#include "data/cifar10.h"
#include "data/transforms.h"
#include "engine/tandem.h"

namespace tandem::data {
namespace {

// A hand-made image: pixel (c, y, x) = (c * 64 + y * 2 + x) % 256, distinct within a channel row.
std::vector<uint8_t> gradient_image() {
  std::vector<uint8_t> image(kCifarImageBytes);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x)
        image[(c * 32 + y) * 32 + x] = static_cast<uint8_t>((c * 64 + y * 2 + x) % 256);
  return image;
}

float at(const std::vector<float>& image, int c, int y, int x) {
  return image[(c * 32 + y) * 32 + x];
}

TEST(Transforms, CropShiftsAndPadsWithZeros) {
  const auto src = gradient_image();
  std::vector<float> dst(kCifarImageBytes);
  // Window at (top 0, left 8) of the 4-padded image: rows shift down by 4, columns left by 4.
  crop_flip_normalize(src.data(), dst.data(), 4, 0, 8, false, false);
  EXPECT_EQ(at(dst, 0, 0, 0), 0.0f);  // padding row
  EXPECT_FLOAT_EQ(at(dst, 0, 4, 0), src[(0 * 32 + 0) * 32 + 4] / 255.0f);
  EXPECT_FLOAT_EQ(at(dst, 1, 10, 27), src[(1 * 32 + 6) * 32 + 31] / 255.0f);
  EXPECT_EQ(at(dst, 1, 10, 28), 0.0f);  // padding column
}

TEST(Transforms, FlipMirrorsColumns) {
  const auto src = gradient_image();
  std::vector<float> dst(kCifarImageBytes);
  crop_flip_normalize(src.data(), dst.data(), 4, 4, 4, true, false);  // centred window, flipped
  for (int x = 0; x < 32; ++x)
    EXPECT_FLOAT_EQ(at(dst, 2, 5, x), src[(2 * 32 + 5) * 32 + 31 - x] / 255.0f);
}

TEST(Transforms, NormalisesPerChannel) {
  std::vector<uint8_t> src(kCifarImageBytes, 255);
  std::vector<float> dst(kCifarImageBytes);
  crop_flip_normalize(src.data(), dst.data(), 0, 0, 0, false, true);
  for (int c = 0; c < 3; ++c)
    EXPECT_NEAR(at(dst, c, 7, 7), (1.0f - kCifarMean[c]) / kCifarStd[c], 1e-5f);
}

TEST(Transforms, SeededAndReproducible) {
  const auto src = gradient_image();
  std::vector<float> a(kCifarImageBytes), b(kCifarImageBytes), c(kCifarImageBytes);
  Generator g1(11), g2(11);
  bool differs = false;
  for (int i = 0; i < 20; ++i) {
    transform_image(src.data(), a.data(), {}, g1);
    transform_image(src.data(), b.data(), {}, g2);
    ASSERT_EQ(a, b);
    transform_image(src.data(), c.data(), eval_transform(), g1);
    differs = differs || a != c;
  }
  EXPECT_TRUE(differs) << "augmentation never moved the image";
  // Each augmented image is one of the 9 × 9 × 2 possible windows.
  Generator g3(12);
  transform_image(src.data(), a.data(), {}, g3);
  bool found = false;
  for (int top = 0; top <= 8 && !found; ++top)
    for (int left = 0; left <= 8 && !found; ++left)
      for (bool flip : {false, true}) {
        crop_flip_normalize(src.data(), c.data(), 4, top, left, flip, true);
        found = found || a == c;
      }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace tandem::data
