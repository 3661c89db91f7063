#pragma once
/// CIFAR-10 augmentation and normalisation, as torchvision's
/// RandomCrop(32, padding=4) → RandomHorizontalFlip() → ToTensor() → Normalize(mean, std).
/// Every random choice comes from the Generator passed in: seeded and reproducible.

#include <cstdint>

#include "engine/random.h"

namespace tandem::data {

/// Per-channel CIFAR-10 training-set statistics of pixel/255 (the exact values; the widely
/// copied std (0.2023, 0.1994, 0.2010) is a miscomputed one).
constexpr float kCifarMean[3] = {0.4914f, 0.4822f, 0.4465f};
constexpr float kCifarStd[3] = {0.2470f, 0.2435f, 0.2616f};

struct TransformOptions {
  bool random_crop = true;  ///< pad with zeros by `padding`, then take a random 32×32 window
  int64_t padding = 4;
  bool horizontal_flip = true;  ///< with probability 1/2
  bool normalize = true;        ///< (pixel/255 − mean) / std; else pixel/255
};

/// Evaluation: no augmentation, normalisation only.
inline TransformOptions eval_transform() {
  return {.random_crop = false, .horizontal_flip = false};
}

/// The deterministic core: the 32×32 window whose top-left corner is (top, left) in the image
/// padded by `padding`, mirrored when `flip`, scaled and normalised.
/// src: (3, 32, 32) uint8, dst: (3, 32, 32) float32.
void crop_flip_normalize(const uint8_t* src, float* dst, int64_t padding, int64_t top, int64_t left,
                         bool flip, bool normalize);

/// Draws the crop and flip from `generator`, then calls crop_flip_normalize.
void transform_image(const uint8_t* src, float* dst, const TransformOptions& options,
                     Generator& generator);

}  // namespace tandem::data
