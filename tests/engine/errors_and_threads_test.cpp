#include <gtest/gtest.h>

#include <omp.h>

#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "engine/cpu/parallel.h"
#include "engine/tandem.h"
#include "tests/support/error_message.h"
#include "tests/support/scoped_env.h"

namespace tandem {
namespace {

using testing::error_message;

TEST(Errors, NameTheOpAndTheShapes) {
  EXPECT_NE(error_message([] {
              add(zeros({2, 3}), zeros({4}));
            }).find("[add] shapes [2, 3] and [4] do not broadcast"),
            std::string::npos);
  EXPECT_NE(error_message([] {
              matmul(zeros({2, 3}), zeros({2, 3}));
            }).find("[matmul] shapes [2, 3] and [2, 3] cannot be multiplied"),
            std::string::npos);
  EXPECT_NE(error_message([] {
              linear(zeros({2, 3}), zeros({4, 5}));
            }).find("[linear] input [2, 3] has 3 features"),
            std::string::npos);
  EXPECT_NE(error_message([] {
              relu(zeros({2}, {.dtype = DType::Int64}));
            }).find("[relu] input is int64, expected float32"),
            std::string::npos);
}

TEST(Errors, NameTheDevices) {
  const std::string message = error_message(
      [] { mul(zeros({2}, {.device = Device::cpu(0)}), zeros({2}, {.device = Device::cpu(1)})); });
  EXPECT_NE(message.find("[mul] tensors on different devices: cpu:0 and cpu:1"), std::string::npos)
      << message;
}

// TANDEM_DEBUG for one test.
class DebugVariable : public testing::ScopedEnvironmentVariable {
 public:
  explicit DebugVariable(const char* value) : ScopedEnvironmentVariable("TANDEM_DEBUG", value) {}
};

Error item_error() {
  try {
    zeros({2}).item();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an error";
  return Error("");
}

TEST(Errors, CarryFileAndLineUnderTandemDebug) {
  const DebugVariable on("1");
  const Error error = item_error();
  const std::string what = error.what();
  EXPECT_EQ(what.rfind(error.message(), 0), 0u) << what;
  EXPECT_EQ(error.message().rfind("[item]", 0), 0u) << error.message();
  EXPECT_NE(what.find("` failed) at ", error.message().size()), std::string::npos) << what;
  EXPECT_NE(what.find("tensor.cpp:", error.message().size()), std::string::npos) << what;
  EXPECT_EQ(message_of(error), what);  // what programs show, the location included
}

// Note [Error locations]: users see the message alone, also through what().
TEST(Errors, WhatLeavesOutTheLocationUnlessTandemDebug) {
  for (const char* value : {static_cast<const char*>(nullptr), "", "0"}) {
    const DebugVariable off(value);
    const Error error = item_error();
    EXPECT_EQ(error.message().rfind("[item]", 0), 0u) << error.message();
    EXPECT_EQ(std::string(error.what()), error.message()) << (value ? value : "unset");
    EXPECT_EQ(message_of(error), error.message());
  }
  EXPECT_EQ(message_of(std::runtime_error("plain")), "plain");
}

TEST(Errors, UndefinedTensorsAreRejected) {
  EXPECT_THROW(Tensor().shape(), Error);
  EXPECT_THROW(relu(Tensor()), Error);
}

TEST(Threads, GuardOverridesOnlyTheCallingThread) {
  const int global = num_threads();
  {
    ThreadCountGuard guard(1);
    EXPECT_EQ(num_threads(), 1);
    int other = 0;
    std::thread([&] { other = num_threads(); }).join();
    EXPECT_EQ(other, global);
  }
  EXPECT_EQ(num_threads(), global);
  EXPECT_THROW(ThreadCountGuard(0), Error);
}

TEST(Threads, ParallelForUsesTheCallersShare) {
  const auto threads_used = [] {
    std::mutex mutex;
    std::set<int> ids;
    cpu::parallel_for(1 << 20, 1, [&](int64_t, int64_t) {
      std::lock_guard lock(mutex);
      ids.insert(omp_get_thread_num());
    });
    return ids.size();
  };
  {
    ThreadCountGuard guard(1);
    EXPECT_EQ(threads_used(), 1u);
  }
  {
    ThreadCountGuard guard(3);  // may exceed the cores: OpenMP still makes the team
    EXPECT_EQ(threads_used(), 3u);
  }
}

TEST(Threads, SetNumThreadsChangesTheDefault) {
  const int before = num_threads();
  set_num_threads(2);
  EXPECT_EQ(num_threads(), 2);
  set_num_threads(before);
  EXPECT_THROW(set_num_threads(0), Error);
}

}  // namespace
}  // namespace tandem
