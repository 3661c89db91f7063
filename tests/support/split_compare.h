#pragma once
/// A model split over devices (DataParallel) or ranks (DDP) against the same model on one device:
/// expect_close_to_reference with the tolerance the split allows.

#include <string>

#include "engine/tensor.h"
#include "nn/precision.h"
#include "tests/support/tensor_compare.h"

namespace tandem::testing {

/// Shards (or ranks) change only the float32 summation order (tensor_compare.h). In bfloat16 each
/// shard's weight gradient is also rounded to 8 significant bits before the shards are summed,
/// where one device rounds the sum once: a few 2^-8 of the largest gradient.
inline void expect_close_to_unsplit(const Tensor& actual, const Tensor& expected,
                                    const std::string& what,
                                    nn::Precision precision = nn::Precision::Float32) {
  expect_close_to_reference(actual, expected, what,
                            precision == nn::Precision::BFloat16 ? 1e-2 : 2e-4);
}

}  // namespace tandem::testing
