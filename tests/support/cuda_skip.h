#pragma once
/// GPU tests (suites named *Gpu, CTest label "gpu") begin with TANDEM_SKIP_WITHOUT_CUDA(): where
/// CUDA cannot run they skip with the one-line reason ("built without CUDA", "no CUDA device:
/// <the driver's message>") instead of passing vacuously.
///
/// Note [Fail, don't skip]: a GPU machine whose CUDA cannot run this build (a driver older than
/// CUDA 13's R580, say) must not look like a machine without GPUs, where every gpu test skips
/// and nobody notices. So in a build with the CUDA backend, when nvidia-smi lists GPUs but CUDA
/// is not available, the gpu tests fail with the engine's reason ("CUDA is unusable: NVIDIA
/// driver 535.104.05 supports CUDA up to 12.2, ..."). Hiding the GPUs on purpose
/// (CUDA_VISIBLE_DEVICES set, even to nothing) skips as before.
///
/// TANDEM_WITH_CUDA (1 or 0, set by tests/CMakeLists.txt) tells test files whether the
/// engine/cuda headers exist in this build.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/backend.h"

namespace tandem::testing {

/// Whether the output of the shell command `command` (nvidia-smi -L) lists a GPU: a line that
/// starts with "GPU ".
inline bool lists_gpus(const char* command) {
  FILE* pipe = popen(command, "r");
  if (pipe == nullptr) return false;
  std::string output;
  char buffer[256];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  pclose(pipe);
  return output.rfind("GPU ", 0) == 0 || output.find("\nGPU ") != std::string::npos;
}

/// Note [Fail, don't skip]: whether this machine has GPUs that the tests were not told to hide.
inline bool gpus_expected() {
  static const bool expected =
      std::getenv("CUDA_VISIBLE_DEVICES") == nullptr && lists_gpus("nvidia-smi -L 2>/dev/null");
  return expected;
}

}  // namespace tandem::testing

#define TANDEM_SKIP_WITHOUT_CUDA()                                        \
  do {                                                                    \
    if (!::tandem::cuda_available()) {                                    \
      if (TANDEM_WITH_CUDA && ::tandem::testing::gpus_expected()) {       \
        GTEST_FAIL() << "nvidia-smi lists GPUs but CUDA cannot be used: " \
                     << ::tandem::cuda_unavailable_reason();              \
      }                                                                   \
      GTEST_SKIP() << ::tandem::cuda_unavailable_reason();                \
    }                                                                     \
  } while (false)
