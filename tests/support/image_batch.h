#pragma once
/// A CIFAR-shaped batch for model tests: (n, 3, 32, 32) standard normal images drawn from `seed`
/// and labels (i * label_stride + label_offset) % 10, so every class shows up.

#include <cstdint>
#include <vector>

#include "engine/tandem.h"

namespace tandem::testing {

struct ImageBatch {
  Tensor images;  ///< (n, 3, 32, 32) float32
  Tensor labels;  ///< (n) int64
};

inline ImageBatch random_image_batch(int64_t n, uint64_t seed, int64_t label_stride = 7,
                                     int64_t label_offset = 3) {
  Generator generator(seed);
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    labels[static_cast<size_t>(i)] = (i * label_stride + label_offset) % 10;
  return {randn({n, 3, 32, 32}, generator), from_vector(labels, {n}, {.dtype = DType::Int64})};
}

}  // namespace tandem::testing
