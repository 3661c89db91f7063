// What TANDEM_SKIP_WITHOUT_CUDA() does with each machine and build (Note [Fail, don't skip] in
// tests/support/cuda_skip.h), as a pure function of the facts: no GPU needed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "tests/support/cuda_skip.h"

namespace tandem::testing {
namespace {

constexpr const char* kOldDriver =
    "CUDA is unusable: NVIDIA driver 535.104.05 supports CUDA up to 12.2, but this build uses "
    "CUDA 13.0, which needs driver R580 or newer";

TEST(GpuTestDecision, CudaAvailableRuns) {
  for (bool listed : {false, true}) {
    const GpuTestDecision d =
        decide_gpu_test({.cuda_available = true, .built_with_cuda = true, .gpus_expected = listed});
    EXPECT_EQ(d.action, GpuTestAction::Run);
    EXPECT_EQ(d.message, "");
  }
}

// No GPU listed (or hidden with CUDA_VISIBLE_DEVICES): skip with the reason, whatever the build.
TEST(GpuTestDecision, AMachineWithoutGpusSkipsSayingWhy) {
  const GpuTestDecision cpu_build =
      decide_gpu_test({.built_with_cuda = false, .unavailable_reason = "built without CUDA"});
  EXPECT_EQ(cpu_build.action, GpuTestAction::Skip);
  EXPECT_EQ(cpu_build.message, "built without CUDA");
  const GpuTestDecision cuda_build = decide_gpu_test(
      {.built_with_cuda = true, .unavailable_reason = "no CUDA device: no CUDA-capable device"});
  EXPECT_EQ(cuda_build.action, GpuTestAction::Skip);
  EXPECT_EQ(cuda_build.message, "no CUDA device: no CUDA-capable device");
}

// The CUDA review's D2: a driver too old for the build's CUDA is not "no GPU".
TEST(GpuTestDecision, ACudaBuildThatCannotUseTheListedGpusFails) {
  for (bool allowed : {false, true}) {  // the opt-out is for CPU-only builds only
    const GpuTestDecision d = decide_gpu_test({.built_with_cuda = true,
                                               .gpus_expected = true,
                                               .cpu_only_allowed = allowed,
                                               .unavailable_reason = kOldDriver});
    EXPECT_EQ(d.action, GpuTestAction::Fail);
    EXPECT_EQ(d.message,
              std::string("nvidia-smi lists GPUs but CUDA cannot be used: ") + kOldDriver);
  }
}

// The CUDA review's N5: TANDEM_CUDA=AUTO that missed cuDNN or NCCL on the GPU machine builds
// CPU-only; its gpu tests must not all skip in silence.
TEST(GpuTestDecision, ACpuOnlyBuildOnAGpuMachineFailsUnlessAllowed) {
  const GpuTestDecision d = decide_gpu_test({.built_with_cuda = false,
                                             .gpus_expected = true,
                                             .unavailable_reason = "built without CUDA"});
  EXPECT_EQ(d.action, GpuTestAction::Fail);
  EXPECT_EQ(d.message,
            "nvidia-smi lists GPUs but this build has no CUDA backend (TANDEM_CUDA=AUTO did not "
            "find the toolkit, cuDNN, NCCL or cuBLAS: its configure summary says which); "
            "reconfigure with -DTANDEM_CUDA=ON, or set TANDEM_ALLOW_CPU_ONLY_BUILD=1 to skip the "
            "gpu tests on purpose");
  const GpuTestDecision allowed = decide_gpu_test({.built_with_cuda = false,
                                                   .gpus_expected = true,
                                                   .cpu_only_allowed = true,
                                                   .unavailable_reason = "built without CUDA"});
  EXPECT_EQ(allowed.action, GpuTestAction::Skip);
  EXPECT_EQ(allowed.message, "built without CUDA");
}

// The facts the macro decides on: this process's CUDA and TANDEM_ALLOW_CPU_ONLY_BUILD (exactly
// "1"). nvidia-smi's answer is the machine's, so it is not asserted.
TEST(GpuTestDecision, FactsReadTheOptOutAndTheEnginesReason) {
  if (cuda_available()) {
    EXPECT_TRUE(gpu_test_facts(true).cuda_available);
    return;
  }
  std::optional<std::string> saved;
  if (const char* value = std::getenv("TANDEM_ALLOW_CPU_ONLY_BUILD")) saved = value;
  ::setenv("TANDEM_ALLOW_CPU_ONLY_BUILD", "1", 1);
  const GpuTestFacts allowed = gpu_test_facts(false);
  ::setenv("TANDEM_ALLOW_CPU_ONLY_BUILD", "yes", 1);
  const GpuTestFacts not_one = gpu_test_facts(false);
  ::unsetenv("TANDEM_ALLOW_CPU_ONLY_BUILD");
  const GpuTestFacts unset = gpu_test_facts(true);
  if (saved) ::setenv("TANDEM_ALLOW_CPU_ONLY_BUILD", saved->c_str(), 1);
  EXPECT_TRUE(allowed.cpu_only_allowed);
  EXPECT_FALSE(not_one.cpu_only_allowed);
  EXPECT_FALSE(unset.cpu_only_allowed);
  EXPECT_FALSE(allowed.built_with_cuda);
  EXPECT_TRUE(unset.built_with_cuda);
  EXPECT_EQ(unset.gpus_expected, gpus_expected());
  EXPECT_EQ(unset.unavailable_reason, cuda_unavailable_reason());
}

}  // namespace
}  // namespace tandem::testing
