// check_cuda_major(): the one-line error for an NVIDIA library built for another CUDA major.
#include "engine/cuda/runtime/version_check.h"

#include <gtest/gtest.h>

#include "tests/support/error_message.h"

namespace tandem::cuda {
namespace {

using testing::contains;
using testing::error_message;

TEST(CudaVersionCheck, SameMajorPassesWhateverTheMinor) {
  EXPECT_NO_THROW(check_cuda_major("cudnn", 13000, 13000));
  EXPECT_NO_THROW(check_cuda_major("cudnn", 13020, 13000));
  EXPECT_NO_THROW(check_cuda_major("cudnn", 12000, 12080));
}

TEST(CudaVersionCheck, AnotherMajorNamesBothVersionsAndTheWheel) {
  const std::string message = error_message([] { check_cuda_major("cudnn", 12080, 13000); });
  EXPECT_TRUE(
      contains(message,
               "[cudnn] libcudnn was built for CUDA 12.8, but Tandem for CUDA 13.0: install "
               "cudnn for CUDA 13 (pip install nvidia-cudnn-cu13) and put it first on the "
               "library path (LD_LIBRARY_PATH)"))
      << message;
  const std::string newer = error_message([] { check_cuda_major("cudnn", 13000, 12040); });
  EXPECT_TRUE(contains(newer, "built for CUDA 13.0, but Tandem for CUDA 12.4")) << newer;
  EXPECT_TRUE(contains(newer, "nvidia-cudnn-cu12")) << newer;
}

}  // namespace
}  // namespace tandem::cuda
