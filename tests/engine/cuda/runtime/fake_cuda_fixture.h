#pragma once
// The fixture of the tests on the fake CUDA runtime (Note [Fake CUDA runtime]): each test starts
// from a fresh fake (two devices, no contexts, an empty trace) and ends by checking that no API
// rule was broken and that no error was left behind as the thread's last error, where the next
// CUDA_CHECK_LAUNCH() would blame it on an unrelated kernel.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/fake_cuda/fake_cuda_runtime.h"

namespace tandem::fake_cuda {

class FakeCudaTest : public ::testing::Test {
 protected:
  void SetUp() override { reset(config()); }
  void TearDown() override {
    run_all();
    EXPECT_EQ(violations(), std::vector<std::string>{});
    EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess) << "an error was left as the last error";
  }
  /// What the fake is reset to before each test.
  virtual Config config() const { return {}; }
};

/// The arguments of every call to `function`, in order ("1", "E3 of cuda:0 on S2 of cuda:0"...).
inline std::vector<std::string> details_of(std::string_view function) {
  std::vector<std::string> details;
  for (const Call& call : calls_to(function)) details.push_back(call.detail);
  return details;
}

}  // namespace tandem::fake_cuda
