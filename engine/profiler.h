#pragma once
/// The profiler: timed, named scopes from every thread of the process (op front-ends, autograd
/// nodes, training steps, DDP's all-reduce buckets), kept while a Recording is alive. A Profile
/// becomes a per-op table (engine/profiler_table.h) and a Chrome trace (engine/profiler_trace.h),
/// as torch.profiler's key_averages().table() and export_chrome_trace() do.
///
///   profiler::Recording recording;                  // from here on, every scope is kept
///   for (...) { profiler::RecordScope step("ProfilerStep#3", profiler::Category::Step); ... }
///   const profiler::Profile profile = recording.stop();
///   profiler::write_chrome_trace(profile, "train_cifar.rank0.trace.json", "train_cifar rank 0");
///
/// An op front-end opens one scope, with its FLOPs where they are known:
///
///   const profiler::RecordScope scope("conv2d", [&] { return conv2d_flops(...); });
///
/// Note [Profiler off]: a scope's constructor does one relaxed atomic load (enabled()); with no
/// Recording alive it leaves a null pointer, which its destructor tests, and that is all: no
/// clock read, no lock, no allocation. What a scope needs only while recording (its FLOPs, a name
/// it builds) comes as a function that is called only then.
///
/// Note [Profiler threads]: each thread appends to a buffer of its own, under the buffer's own
/// mutex: nobody else takes it until the Recording stops, so autograd workers, DataParallel
/// replicas and loader threads record side by side without meeting. A scope that a thread opened
/// before stop() and closes after it is dropped; one still open at stop() ends there. Events
/// carry steady_clock times, the clock Work::started_at() uses, so spans from other sources
/// (record_deferred_span) line up with the threads' scopes.
///
/// Note [One profiler per process]: like PyTorch's, the profiler is process-wide state (one
/// Recording at a time), not a parameter: the op front-ends it observes are called from code that
/// knows nothing of it, on threads it does not start.

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tandem::profiler {

using Clock = std::chrono::steady_clock;

/// What an event is; the Chrome trace's "cat" (torch.profiler's names where one fits).
enum class Category : uint8_t {
  Op,             ///< an op front-end or one of its kernels: "cpu_op"
  Backward,       ///< an autograd node's backward: "autograd"
  Step,           ///< a training step, ProfilerStep#N: "user_annotation"
  Communication,  ///< a collective from its start to its end: "communication"
  Annotation,     ///< a phase an app or library marks (DataParallel.scatter): "user_annotation"
};
const char* category_name(Category category);

/// A named number shown with an event in the trace (a bucket's size).
struct Arg {
  const char* key;
  double value;
};

struct Event {
  const char* name = "";  ///< a literal or an intern()ed string: lives as long as the process
  Category category = Category::Op;
  int64_t begin_ns = 0;  ///< steady_clock, nanoseconds
  int64_t end_ns = 0;
  double flops = 0;  ///< floating-point operations of the call; 0: not counted
  std::vector<Arg> args{};
};

/// The events of one thread in the order they began, or a track of spans (DDP's all-reduces).
struct Track {
  int64_t tid = 0;
  std::string name;
  std::vector<Event> events;
};

struct Profile {
  int64_t pid = 0;
  int64_t begin_ns = 0;  ///< the Recording's start and stop
  int64_t end_ns = 0;
  std::vector<Track> tracks;  ///< threads in the order they first recorded, then span tracks
};

namespace detail {
extern std::atomic<bool> recording;
struct ThreadBuffer;
}  // namespace detail

/// Whether a Recording is alive (Note [Profiler off]).
inline bool enabled() noexcept {
  return detail::recording.load(std::memory_order_relaxed);
}

/// A copy of `name` that lives as long as the process: for names built at run time.
const char* intern(const std::string& name);

/// Names this thread in traces ("autograd cpu:1", "loader"); cheap, call it when a thread starts.
/// Unnamed threads are "main" (the process's first thread) or "thread <tid>".
void set_thread_name(std::string name);

/// Times the enclosing block as one event of this thread while a Recording is alive.
class RecordScope {
 public:
  explicit RecordScope(const char* name, Category category = Category::Op) {
    if (enabled()) begin(name, category, 0);
  }
  /// `flops()` (the call's floating-point operations) runs only while recording.
  template <std::invocable Flops>
  RecordScope(const char* name, Flops&& flops) {
    if (enabled()) begin(name, Category::Op, static_cast<double>(flops()));
  }
  /// `make_name()` (a std::string) runs only while recording.
  template <std::invocable MakeName>
  requires std::convertible_to<std::invoke_result_t<MakeName>, std::string> RecordScope(
      MakeName&& make_name, Category category) {
    if (enabled()) begin(intern(make_name()), category, 0);
  }
  ~RecordScope() {
    if (buffer_ != nullptr) end();
  }
  RecordScope(const RecordScope&) = delete;
  RecordScope& operator=(const RecordScope&) = delete;

 private:
  void begin(const char* name, Category category, double flops);
  void end() noexcept;

  detail::ThreadBuffer* buffer_ = nullptr;  ///< null: not recording (Note [Profiler off])
  uint64_t session_ = 0;
  size_t index_ = 0;
};

/// Begin and end of a span, or nothing when it never ran.
using SpanTimes = std::optional<std::pair<Clock::time_point, Clock::time_point>>;

/// While recording: a span on the track named `track` whose times are known only later (a
/// collective still running). `resolve` runs when the Recording stops; a span it cannot time
/// (nothing, or an exception) is left out. Does nothing when not recording.
void record_deferred_span(const std::string& track, std::string name, Category category,
                          std::vector<Arg> args, std::function<SpanTimes()> resolve);

/// Records from construction to stop() (or destruction, which discards). One at a time in a
/// process: a second throws.
class Recording {
 public:
  Recording();
  ~Recording();
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;

  /// Stops recording and returns what every thread recorded; only the first call has events.
  Profile stop();

 private:
  bool stopped_ = false;
};

}  // namespace tandem::profiler
