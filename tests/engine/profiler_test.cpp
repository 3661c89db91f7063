// The profiler's recorder (engine/profiler.h) and its Chrome trace (engine/profiler_trace.h):
// what is kept and what is not, threads, nesting, spans, and a trace with the fields Perfetto
// reads. No timing assertions: only orders and containment of times.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/profiler.h"
#include "engine/profiler_trace.h"
#include "engine/tandem.h"
#include "tests/support/error_message.h"

namespace tandem::profiler {
namespace {

using nlohmann::json;
using testing::contains;
using testing::error_message;

const Track* track_named(const Profile& profile, const std::string& name) {
  for (const Track& track : profile.tracks) {
    if (track.name == name) return &track;
  }
  return nullptr;
}

std::vector<std::string> names_of(const Track& track) {
  std::vector<std::string> names;
  for (const Event& event : track.events) names.emplace_back(event.name);
  return names;
}

TEST(Profiler, KeepsOnlyWhatRunsWhileRecording) {
  EXPECT_FALSE(enabled());
  { const RecordScope before("before"); }
  Profile profile;
  {
    Recording recording;
    EXPECT_TRUE(enabled());
    { const RecordScope during("during"); }
    profile = recording.stop();
  }
  EXPECT_FALSE(enabled());
  { const RecordScope after("after"); }
  ASSERT_EQ(profile.tracks.size(), 1u);
  EXPECT_EQ(names_of(profile.tracks[0]), std::vector<std::string>{"during"});
  EXPECT_EQ(profile.tracks[0].name, "main");  // gtest runs its tests on the process's thread
  EXPECT_LE(profile.begin_ns, profile.tracks[0].events[0].begin_ns);
  EXPECT_LE(profile.tracks[0].events[0].end_ns, profile.end_ns);
}

TEST(Profiler, OneRecordingAtATime) {
  Recording recording;
  EXPECT_TRUE(contains(error_message([] { Recording second; }),
                       "[profiler] a recording is already running in this process; stop it first"));
}

TEST(Profiler, ScopesNestAndCarryTheirFlops) {
  Recording recording;
  {
    const RecordScope outer("outer");
    const RecordScope inner("inner", [] { return 42.0; });
  }
  const Profile profile = recording.stop();
  ASSERT_EQ(profile.tracks.size(), 1u);
  const std::vector<Event>& events = profile.tracks[0].events;
  ASSERT_EQ(names_of(profile.tracks[0]), (std::vector<std::string>{"outer", "inner"}));
  EXPECT_LE(events[0].begin_ns, events[1].begin_ns);
  EXPECT_LE(events[1].end_ns, events[0].end_ns);
  EXPECT_EQ(events[0].flops, 0.0);
  EXPECT_EQ(events[1].flops, 42.0);
}

TEST(Profiler, WorkDoneForAScopeOnlyWhileRecording) {
  int calls = 0;
  const auto flops = [&] {
    ++calls;
    return 1.0;
  };
  { const RecordScope off("off", flops); }
  {
    const RecordScope off([&] { return std::to_string(++calls); }, Category::Annotation);
  }
  EXPECT_EQ(calls, 0);  // Note [Profiler off]
  Recording recording;
  { const RecordScope on("on", flops); }
  {
    const RecordScope named([&] { return "step " + std::to_string(++calls); }, Category::Step);
  }
  const Profile profile = recording.stop();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(names_of(profile.tracks.at(0)), (std::vector<std::string>{"on", "step 2"}));
  EXPECT_EQ(profile.tracks[0].events[1].category, Category::Step);
}

TEST(Profiler, EachThreadHasItsTrackAndName) {
  Recording recording;
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([t] {
      set_thread_name("worker " + std::to_string(t));
      for (int i = 0; i < 100; ++i) const RecordScope scope("work");
    });
  }
  for (std::thread& thread : threads) thread.join();
  const Profile profile = recording.stop();  // their buffers outlive the threads
  for (int t = 0; t < 3; ++t) {
    const Track* track = track_named(profile, "worker " + std::to_string(t));
    ASSERT_NE(track, nullptr) << t;
    EXPECT_EQ(track->events.size(), 100u);
  }
  EXPECT_EQ(profile.tracks.size(), 3u);
}

// Recordings start and stop while other threads record: each thread enrols in each recording
// afresh, and nothing of one recording leaks into the next (ThreadSanitizer runs this).
TEST(Profiler, RecordingsComeAndGoWhileThreadsRecord) {
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      while (!done.load()) {
        const RecordScope outer("outer");
        const RecordScope inner("inner", [] { return 1.0; });
      }
    });
  }
  for (int round = 0; round < 20; ++round) {
    Recording recording;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    const Profile profile = recording.stop();
    for (const Track& track : profile.tracks) {
      for (const Event& event : track.events) {
        EXPECT_LE(profile.begin_ns, event.begin_ns);
        EXPECT_LE(event.begin_ns, event.end_ns);
        EXPECT_LE(event.end_ns, profile.end_ns);
      }
    }
  }
  done = true;
  for (std::thread& thread : threads) thread.join();
}

TEST(Profiler, AScopeOpenAtStopEndsThereAndOneAcrossRecordingsIsDropped) {
  std::optional<Recording> first(std::in_place);
  std::optional<RecordScope> open(std::in_place, "open");
  const Profile profile = first->stop();
  first.reset();
  ASSERT_EQ(profile.tracks.size(), 1u);
  EXPECT_EQ(profile.tracks[0].events[0].end_ns, profile.end_ns);
  Recording second;
  { const RecordScope fresh("fresh"); }
  open.reset();  // began under the first recording: not the second's
  EXPECT_EQ(names_of(second.stop().tracks.at(0)), std::vector<std::string>{"fresh"});
}

TEST(Profiler, DeferredSpansGetATrackOfTheirOwn) {
  record_deferred_span("ignored", "not recording", Category::Communication, {},
                       [] { return SpanTimes(); });
  Recording recording;
  const Clock::time_point start = Clock::now();
  const Clock::time_point end = start + std::chrono::milliseconds(3);
  record_deferred_span("DDP all-reduce (test)", "bucket 1", Category::Communication, {{"MiB", 2.5}},
                       [=] {
                         return SpanTimes({start, end});
                       });
  record_deferred_span("DDP all-reduce (test)", "bucket 0", Category::Communication, {}, [=] {
    return SpanTimes({start - std::chrono::milliseconds(5), start});
  });
  record_deferred_span("DDP all-reduce (test)", "never ran", Category::Communication, {},
                       [] { return SpanTimes(); });
  record_deferred_span("DDP all-reduce (test)", "failed", Category::Communication, {},
                       []() -> SpanTimes { throw std::runtime_error("broken"); });
  const Profile profile = recording.stop();
  ASSERT_EQ(profile.tracks.size(), 1u);
  const Track& track = profile.tracks[0];
  EXPECT_EQ(track.name, "DDP all-reduce (test)");
  EXPECT_EQ(names_of(track), (std::vector<std::string>{"bucket 0", "bucket 1"}));  // by start
  EXPECT_EQ(track.events[1].end_ns - track.events[1].begin_ns, 3'000'000);
  ASSERT_EQ(track.events[1].args.size(), 1u);
  EXPECT_STREQ(track.events[1].args[0].key, "MiB");
  EXPECT_GT(track.tid, int64_t{1} << 22);  // beyond any thread id
}

// The events of each tid in a Chrome trace, as (begin, end) in microseconds, by begin.
std::map<int64_t, std::vector<std::pair<double, double>>> spans_by_tid(const json& trace) {
  std::map<int64_t, std::vector<std::pair<double, double>>> spans;
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] != "X") continue;
    const double ts = event["ts"].get<double>();
    spans[event["tid"].get<int64_t>()].emplace_back(ts, ts + event["dur"].get<double>());
  }
  for (auto& [tid, list] : spans) std::sort(list.begin(), list.end());
  return spans;
}

// Perfetto needs the complete events of a thread to nest: each inside the one open before it,
// or after it.
void expect_nested(const std::vector<std::pair<double, double>>& spans) {
  constexpr double kRounding = 1e-3;  // µs: the trace's times are nanoseconds / 1000
  std::vector<double> open_ends;
  for (const auto& [begin, end] : spans) {
    while (!open_ends.empty() && open_ends.back() <= begin + kRounding) open_ends.pop_back();
    if (!open_ends.empty()) {
      EXPECT_LE(end, open_ends.back() + kRounding) << begin;
    }
    open_ends.push_back(end);
  }
}

TEST(ChromeTrace, HasTheFieldsPerfettoReadsAndNestsPerThread) {
  Generator generator(0);
  const Tensor x = randn({2, 3, 8, 8}, generator, {.requires_grad = true});
  const Tensor w = randn({4, 3, 3, 3}, generator, {.requires_grad = true});
  Recording recording;
  std::thread([&] {
    set_thread_name("helper");
    const RecordScope scope("beside");
  }).join();
  sum(relu(conv2d(x, w, Tensor(), {.padding = 1}))).backward();
  const json trace = json::parse(chrome_trace_json(recording.stop(), "test process"));

  ASSERT_TRUE(trace["traceEvents"].is_array());
  std::map<std::string, int> names;
  std::vector<std::string> thread_names;
  for (const json& event : trace["traceEvents"]) {
    for (const char* key : {"ph", "pid", "tid", "name"}) ASSERT_TRUE(event.contains(key)) << key;
    if (event["ph"] == "M") {
      if (event["name"] == "process_name") {
        EXPECT_EQ(event["args"]["name"], "test process");
      }
      if (event["name"] == "thread_name") thread_names.push_back(event["args"]["name"]);
      continue;
    }
    ASSERT_EQ(event["ph"], "X");
    for (const char* key : {"ts", "dur", "cat", "args"}) ASSERT_TRUE(event.contains(key)) << key;
    EXPECT_GE(event["dur"].get<double>(), 0.0);
    names[event["name"].get<std::string>()] += 1;
  }
  EXPECT_NE(std::find(thread_names.begin(), thread_names.end(), "main"), thread_names.end());
  EXPECT_NE(std::find(thread_names.begin(), thread_names.end(), "helper"), thread_names.end());
  for (const char* name : {"conv2d", "relu", "sum", "Conv2dBackward", "ReluBackward",
                           "conv2d_backward_input", "conv2d_backward_weight", "AccumulateGrad"}) {
    EXPECT_GT(names[name], 0) << name;
  }
  for (const auto& [tid, spans] : spans_by_tid(trace)) expect_nested(spans);
}

TEST(ChromeTrace, ShowsTheFlopsOfAConvolution) {
  Generator generator(0);
  const Tensor x = randn({2, 3, 8, 8}, generator);
  const Tensor w = randn({4, 3, 3, 3}, generator);
  Recording recording;
  conv2d(x, w, Tensor(), {.padding = 1});
  const json trace = json::parse(chrome_trace_json(recording.stop(), "p"));
  for (const json& event : trace["traceEvents"]) {
    if (event["name"] != "conv2d") continue;
    EXPECT_DOUBLE_EQ(event["args"]["GFLOP"].get<double>(), 2.0 * 2 * 4 * 8 * 8 * 3 * 9 / 1e9);
    return;
  }
  ADD_FAILURE() << "no conv2d event";
}

}  // namespace
}  // namespace tandem::profiler
