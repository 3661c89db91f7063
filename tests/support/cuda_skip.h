#pragma once
/// GPU tests (suites named *Gpu, CTest label "gpu") begin with TANDEM_SKIP_WITHOUT_CUDA(): where
/// CUDA cannot run they skip with the one-line reason ("built without CUDA", "no CUDA device:
/// <the driver's message>") instead of passing vacuously.
///
/// Note [Fail, don't skip]: a GPU machine whose CUDA cannot run this build must not look like a
/// machine without GPUs, where every gpu test skips and nobody notices. So where nvidia-smi lists
/// GPUs but CUDA is not available, the gpu tests fail, saying why:
/// - a build with the CUDA backend on a driver older than CUDA 13's R580, say: the engine's
///   reason ("CUDA is unusable: NVIDIA driver 535.104.05 supports CUDA up to 12.2, ...");
/// - a CPU-only build (TANDEM_CUDA=AUTO that did not find cuDNN, NCCL or cuBLAS): that it has no
///   CUDA backend, and how to get one (-DTANDEM_CUDA=ON says what is missing at configure time).
/// Skipping stays possible on purpose: CUDA_VISIBLE_DEVICES set (even to nothing) hides the GPUs,
/// and TANDEM_ALLOW_CPU_ONLY_BUILD=1 accepts a CPU-only build on a GPU machine.
///
/// TANDEM_WITH_CUDA (1 or 0, set by tests/CMakeLists.txt) tells test files whether the
/// engine/cuda headers exist in this build.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/device_runtime.h"

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

/// What decides a gpu test's fate (gpu_test_facts() reads them from this process and machine).
struct GpuTestFacts {
  bool cuda_available = false;       ///< tandem::cuda_available()
  bool built_with_cuda = false;      ///< TANDEM_WITH_CUDA
  bool gpus_expected = false;        ///< gpus_expected(): nvidia-smi lists GPUs, none hidden
  bool cpu_only_allowed = false;     ///< TANDEM_ALLOW_CPU_ONLY_BUILD=1
  std::string unavailable_reason{};  ///< tandem::cuda_unavailable_reason()
};

enum class GpuTestAction { Run, Skip, Fail };

struct GpuTestDecision {
  GpuTestAction action = GpuTestAction::Run;
  std::string message;  ///< why it skips or fails, one line; empty when it runs
};

/// Note [Fail, don't skip], as a pure function of the facts.
inline GpuTestDecision decide_gpu_test(const GpuTestFacts& f) {
  if (f.cuda_available) return {};
  if (f.gpus_expected && f.built_with_cuda) {
    return {GpuTestAction::Fail,
            "nvidia-smi lists GPUs but CUDA cannot be used: " + f.unavailable_reason};
  }
  if (f.gpus_expected && !f.cpu_only_allowed) {
    return {GpuTestAction::Fail,
            "nvidia-smi lists GPUs but this build has no CUDA backend (TANDEM_CUDA=AUTO did not "
            "find the toolkit, cuDNN, NCCL or cuBLAS: its configure summary says which); "
            "reconfigure with -DTANDEM_CUDA=ON, or set TANDEM_ALLOW_CPU_ONLY_BUILD=1 to skip the "
            "gpu tests on purpose"};
  }
  return {GpuTestAction::Skip, f.unavailable_reason};
}

/// The facts of this process, built with the CUDA backend or not (TANDEM_WITH_CUDA, which only
/// the macro below reads: cuda_host_tests include this header without it); nvidia-smi is asked
/// only where CUDA is not available.
inline GpuTestFacts gpu_test_facts(bool built_with_cuda) {
  if (::tandem::cuda_available()) return {.cuda_available = true};
  const char* allowed = std::getenv("TANDEM_ALLOW_CPU_ONLY_BUILD");
  return {.cuda_available = false,
          .built_with_cuda = built_with_cuda,
          .gpus_expected = gpus_expected(),
          .cpu_only_allowed = allowed != nullptr && std::string(allowed) == "1",
          .unavailable_reason = ::tandem::cuda_unavailable_reason()};
}

}  // namespace tandem::testing

#define TANDEM_SKIP_WITHOUT_CUDA()                                           \
  do {                                                                       \
    const ::tandem::testing::GpuTestDecision tandem_gpu_test_ =              \
        ::tandem::testing::decide_gpu_test(                                  \
            ::tandem::testing::gpu_test_facts(TANDEM_WITH_CUDA != 0));       \
    if (tandem_gpu_test_.action == ::tandem::testing::GpuTestAction::Fail) { \
      GTEST_FAIL() << tandem_gpu_test_.message;                              \
    }                                                                        \
    if (tandem_gpu_test_.action == ::tandem::testing::GpuTestAction::Skip) { \
      GTEST_SKIP() << tandem_gpu_test_.message;                              \
    }                                                                        \
  } while (false)
