// The profiler's per-op table (engine/profiler_table.h) on profiles whose times are known: self
// and total times, steps, other threads, FLOPs, and the shares that add up to the steps' time.
#include <gtest/gtest.h>

#include "engine/profiler_table.h"

namespace tandem::profiler {
namespace {

constexpr int64_t kMs = 1'000'000;  // ns

Event event(const char* name, int64_t begin_ms, int64_t end_ms, Category category = Category::Op,
            double flops = 0) {
  return {.name = name,
          .category = category,
          .begin_ns = begin_ms * kMs,
          .end_ns = end_ms * kMs,
          .flops = flops};
}

const OpTotals& op_named(const ThreadTotals& thread, const std::string& name) {
  for (const OpTotals& op : thread.ops) {
    if (op.name == name) return op;
  }
  ADD_FAILURE() << "no op " << name << " on " << thread.thread;
  static const OpTotals none;
  return none;
}

// main: a 100 ms step holding conv [10, 50) (which holds gemm [20, 30)) and conv [60, 70); then
// "later" [120, 130), after the step. helper: "load" [5, 40) during the step, "idle" after it.
Profile known_profile() {
  Profile profile{.pid = 7, .begin_ns = 0, .end_ns = 200 * kMs, .tracks = {}};
  profile.tracks.push_back(
      {1,
       "main",
       {event("ProfilerStep#0", 0, 100, Category::Step), event("conv", 10, 50, Category::Op, 3e6),
        event("gemm", 20, 30, Category::Op, 1e6), event("conv", 60, 70),
        event("later", 120, 130)}});
  profile.tracks.push_back({2, "helper", {event("load", 5, 40), event("idle", 150, 160)}});
  return profile;
}

TEST(ProfileTable, SelfTimesAndOutsideOpsAddUpToTheSteps) {
  const ProfileSummary s = summarize(known_profile());
  EXPECT_EQ(s.steps, 1);
  EXPECT_DOUBLE_EQ(s.step_ms, 100);
  EXPECT_EQ(s.step_thread.thread, "main");
  ASSERT_EQ(s.step_thread.ops.size(), 2u);  // "later" ran outside the step
  const OpTotals& conv = op_named(s.step_thread, "conv");
  EXPECT_EQ(conv.calls, 2);
  EXPECT_DOUBLE_EQ(conv.self_ms, 30 + 10);
  EXPECT_DOUBLE_EQ(conv.total_ms, 40 + 10);
  EXPECT_DOUBLE_EQ(conv.flops, 3e6);
  const OpTotals& gemm = op_named(s.step_thread, "gemm");
  EXPECT_DOUBLE_EQ(gemm.self_ms, 10);
  EXPECT_EQ(s.step_thread.ops[0].name, "conv");  // largest self time first
  EXPECT_DOUBLE_EQ(s.outside_ops_ms, 50);
  EXPECT_DOUBLE_EQ(conv.self_ms + gemm.self_ms + s.outside_ops_ms, s.step_ms);
  EXPECT_DOUBLE_EQ(s.flops, 4e6);
}

TEST(ProfileTable, OtherThreadsCountWhatStartedDuringTheSteps) {
  const ProfileSummary s = summarize(known_profile());
  ASSERT_EQ(s.other_threads.size(), 1u);
  EXPECT_EQ(s.other_threads[0].thread, "helper");
  ASSERT_EQ(s.other_threads[0].ops.size(), 1u);
  EXPECT_EQ(s.other_threads[0].ops[0].name, "load");
  EXPECT_DOUBLE_EQ(s.other_threads[0].busy_ms, 35);
}

TEST(ProfileTable, AnOpInsideItselfCountsItsTotalOnce) {
  Profile profile{.begin_ns = 0, .end_ns = 20 * kMs, .tracks = {}};
  profile.tracks.push_back(
      {1,
       "main",
       {event("ProfilerStep#0", 0, 20, Category::Step), event("add", 0, 10), event("add", 2, 5)}});
  const ProfileSummary s = summarize(profile);
  const OpTotals& add = op_named(s.step_thread, "add");
  EXPECT_EQ(add.calls, 2);
  EXPECT_DOUBLE_EQ(add.total_ms, 10);
  EXPECT_DOUBLE_EQ(add.self_ms, 10);
}

TEST(ProfileTable, StepsAndTheTimeBetweenThem) {
  Profile profile{.begin_ns = 0, .end_ns = 50 * kMs, .tracks = {}};
  profile.tracks.push_back({1,
                            "main",
                            {event("ProfilerStep#2", 0, 10, Category::Step),
                             event("DataLoader.next", 10, 14, Category::Annotation),
                             event("ProfilerStep#3", 14, 30, Category::Step)}});
  const ProfileSummary s = summarize(profile);
  EXPECT_EQ(s.steps, 2);
  EXPECT_DOUBLE_EQ(s.step_ms, 26);
  EXPECT_DOUBLE_EQ(s.between_steps_ms, 4);
  EXPECT_TRUE(s.step_thread.ops.empty());  // the loader's wait was between the steps
}

TEST(ProfileTable, WithoutStepsTheRecordingIsOneStep) {
  Profile profile{.begin_ns = 0, .end_ns = 10 * kMs, .tracks = {}};
  profile.tracks.push_back({1, "main", {event("conv", 2, 6)}});
  const ProfileSummary s = summarize(profile);
  EXPECT_EQ(s.steps, 0);
  EXPECT_DOUBLE_EQ(s.step_ms, 10);
  EXPECT_DOUBLE_EQ(s.outside_ops_ms, 6);
}

TEST(ProfileTable, FormatsAMarkdownTableWithEveryOpAndTheRest) {
  const std::string text = format_table(summarize(known_profile()));
  EXPECT_NE(text.find("Profile of 1 steps on thread \"main\": 100.00 ms per step"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("| op "), std::string::npos) << text;
  EXPECT_NE(text.find("| conv "), std::string::npos) << text;
  EXPECT_NE(text.find("| gemm "), std::string::npos) << text;
  // gemm: 1 MFLOP in 10 ms is 0.1 GFLOP/s; its 10 ms are 10 % of the step.
  EXPECT_NE(text.find("| 0.1 "), std::string::npos) << text;
  EXPECT_NE(text.find("| 10.0 % "), std::string::npos) << text;
  EXPECT_NE(text.find("| (in a step, not in an op) "), std::string::npos) << text;
  EXPECT_NE(text.find("Thread \"helper\", beside the steps: busy 35.00 ms"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace tandem::profiler
