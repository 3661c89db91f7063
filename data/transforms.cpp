#include "data/transforms.h"

#include "engine/ops/factory.h"

namespace tandem::data {

void crop_flip_normalize(const uint8_t* src, float* dst, int64_t padding, int64_t top, int64_t left,
                         bool flip, bool normalize) {
  constexpr int64_t kSide = 32;
  for (int64_t c = 0; c < 3; ++c) {
    const float scale = normalize ? 1.0f / (255.0f * kCifarStd[c]) : 1.0f / 255.0f;
    const float shift = normalize ? -kCifarMean[c] / kCifarStd[c] : 0.0f;
    for (int64_t y = 0; y < kSide; ++y) {
      const int64_t row = top + y - padding;  // row in the unpadded image
      for (int64_t x = 0; x < kSide; ++x) {
        const int64_t column = left + (flip ? kSide - 1 - x : x) - padding;
        const bool inside = row >= 0 && row < kSide && column >= 0 && column < kSide;
        const float pixel =
            inside ? src[(c * kSide + row) * kSide + column] : 0.0f;  // zero padding
        dst[(c * kSide + y) * kSide + x] = pixel * scale + shift;
      }
    }
  }
}

void transform_image(const uint8_t* src, float* dst, const TransformOptions& options,
                     Generator& generator) {
  const int64_t padding = options.random_crop ? options.padding : 0;
  const auto draw = [&](uint64_t bound) {
    return static_cast<int64_t>(generator.next_u64() % bound);
  };
  const int64_t top = options.random_crop ? draw(static_cast<uint64_t>(2 * padding + 1)) : 0;
  const int64_t left = options.random_crop ? draw(static_cast<uint64_t>(2 * padding + 1)) : 0;
  const bool flip = options.horizontal_flip && draw(2) == 1;
  crop_flip_normalize(src, dst, padding, top, left, flip, options.normalize);
}

}  // namespace tandem::data
