#pragma once
/// The shared finite-difference gradient checker. Every differentiable op's
/// backward is tested through it:
///
///   EXPECT_TRUE(check_gradients([](const auto& in) { return relu(in[0]); }, {x}));
///
/// It projects the output onto a fixed random direction r (loss = Σ out·r), runs
/// backward once, and compares each input's gradient with central differences
/// of the loss, computed in double on the host. Inputs that do not require grad
/// (labels, running stats) are passed through unchanged.

#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "engine/tandem.h"

namespace tandem::testing {

struct GradCheckOptions {
  float eps = 1e-2f;   ///< step of the central difference (float32 data: not smaller)
  float atol = 2e-3f;  ///< |analytic - numeric| <= atol + rtol * |numeric|
  float rtol = 2e-2f;
  uint64_t seed = 1234;  ///< seed of the projection direction
};

using TensorFunction = std::function<Tensor(const std::vector<Tensor>&)>;

::testing::AssertionResult check_gradients(const TensorFunction& fn,
                                           const std::vector<Tensor>& inputs,
                                           const GradCheckOptions& options = {});

}  // namespace tandem::testing
