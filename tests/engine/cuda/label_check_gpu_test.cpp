// Note [Label check]: a bad cross_entropy label on a GPU is reported without the host waiting
// for the loss kernel, by a later call on the device or by raise_bad_labels(device, true).

#include <gtest/gtest.h>

#include "tests/support/cuda_skip.h"

#if TANDEM_WITH_CUDA

#include <cmath>
#include <string>
#include <vector>

#include "engine/cuda/label_check.h"
#include "engine/tandem.h"
#include "tests/support/error_message.h"

namespace tandem::cuda {
namespace {

using testing::error_message;

Tensor gpu_labels(const std::vector<int64_t>& values) {
  return from_vector<int64_t>(values, {static_cast<int64_t>(values.size())},
                              {.dtype = DType::Int64, .device = Device::cuda(0)});
}

TEST(LabelCheckGpu, BadLabelIsAnErrorNamingTheOpOnce) {
  TANDEM_SKIP_WITHOUT_CUDA();
  raise_bad_labels(0, true);  // nothing left over from other tests
  const Tensor logits = zeros({3, 4}, {.device = Device::cuda(0)});
  const Tensor loss = cross_entropy(logits, gpu_labels({0, 4, 1}));
  const std::string message = error_message([] { raise_bad_labels(0, true); });
  EXPECT_NE(message.find("[cross_entropy] label 4 at row 1 is outside [0, 4)"), std::string::npos)
      << message;
  EXPECT_TRUE(std::isnan(loss.item()));  // what a trainer's NaN check sees at that step
  EXPECT_NO_THROW(raise_bad_labels(0, true));
  // The device is still usable afterwards (no sticky CUDA error).
  EXPECT_EQ(sum(ones({4}, {.device = Device::cuda(0)})).item(), 4.0);
}

TEST(LabelCheckGpu, TheNextLossOnTheDeviceReportsAnEarlierBadLabel) {
  TANDEM_SKIP_WITHOUT_CUDA();
  raise_bad_labels(0, true);
  const Tensor logits = zeros({2, 3}, {.device = Device::cuda(0)});
  (void)cross_entropy(logits, gpu_labels({-1, 0}));
  (void)sum(logits).item();  // the bad loss has run: its check is done
  const std::string message = error_message([&] { cross_entropy(logits, gpu_labels({0, 1})); });
  EXPECT_NE(message.find("[cross_entropy] label -1 at row 0 is outside [0, 3)"), std::string::npos)
      << message;
  EXPECT_NO_THROW(cross_entropy(logits, gpu_labels({2, 1})));
  EXPECT_NO_THROW(raise_bad_labels(0, true));
}

}  // namespace
}  // namespace tandem::cuda

#endif  // TANDEM_WITH_CUDA
