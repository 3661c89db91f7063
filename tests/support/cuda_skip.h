#pragma once
/// GPU tests (suites named *Gpu, CTest label "gpu") begin with TANDEM_SKIP_WITHOUT_CUDA(): where
/// CUDA cannot run they skip with the one-line reason ("built without CUDA", "no CUDA device:
/// <the driver's message>") instead of passing vacuously.
///
/// TANDEM_WITH_CUDA (1 or 0, set by tests/CMakeLists.txt) tells test files whether the
/// engine/cuda headers exist in this build.

#include <gtest/gtest.h>

#include "engine/backend.h"

#define TANDEM_SKIP_WITHOUT_CUDA()                                                        \
  do {                                                                                    \
    if (!::tandem::cuda_available()) GTEST_SKIP() << ::tandem::cuda_unavailable_reason(); \
  } while (false)
