#include <gtest/gtest.h>

#include <omp.h>

#include <mutex>
#include <set>
#include <thread>

#include "engine/cpu/parallel.h"
#include "engine/tandem.h"
#include "tests/support/error_message.h"

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

TEST(Errors, CarryFileAndLine) {
  const std::string message = error_message([] { zeros({2}).item(); });
  EXPECT_NE(message.find("[item]"), std::string::npos);
  EXPECT_NE(message.find("tensor.cpp:"), std::string::npos) << message;
}

TEST(Errors, MessageForUsersLeavesOutTheLocation) {
  try {
    zeros({2}).item();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.message().rfind("[item]", 0), 0u) << e.message();
    EXPECT_EQ(e.message().find("tensor.cpp"), std::string::npos) << e.message();
    EXPECT_EQ(message_of(e), e.message());
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(e.message(), 0), 0u) << what;
    EXPECT_NE(what.find("tensor.cpp:", e.message().size()), std::string::npos) << what;
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
