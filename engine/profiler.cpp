#include "engine/profiler.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "engine/error.h"

namespace tandem::profiler {

namespace detail {

std::atomic<bool> recording{false};

/// One thread's events (Note [Profiler threads]). It lives as long as its thread, or as long as
/// the Recording that holds it, whichever is longer.
struct ThreadBuffer {
  std::mutex mutex;      // guards everything below
  uint64_t session = 0;  ///< the Recording these events belong to; 0: none
  Track track;
};

}  // namespace detail

namespace {

using detail::ThreadBuffer;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

int64_t ns_of(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

int64_t this_thread_id() {
  return static_cast<int64_t>(::syscall(SYS_gettid));
}

struct DeferredSpan {
  std::string track;
  std::string name;
  Category category;
  std::vector<Arg> args;
  std::function<SpanTimes()> resolve;
};

/// What the threads share: the current Recording and the buffers and spans it collects.
struct Registry {
  std::mutex mutex;      // guards everything below
  uint64_t session = 0;  ///< the alive Recording's number; 0: none
  uint64_t sessions = 0;
  int64_t begin_ns = 0;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  std::vector<DeferredSpan> deferred;
};

Registry& registry() {
  static Registry instance;
  return instance;
}

std::atomic<uint64_t> current_session{0};

struct ThisThread {
  std::string name;
  std::shared_ptr<ThreadBuffer> buffer;
};
thread_local ThisThread this_thread;

std::string default_thread_name(int64_t tid) {
  return tid == static_cast<int64_t>(::getpid()) ? "main" : "thread " + std::to_string(tid);
}

// This thread's buffer, enrolled in the current Recording; null when none is alive.
ThreadBuffer* enrolled_buffer() {
  const uint64_t session = current_session.load(std::memory_order_acquire);
  if (session == 0) return nullptr;
  if (!this_thread.buffer) {
    this_thread.buffer = std::make_shared<ThreadBuffer>();
    const int64_t tid = this_thread_id();
    this_thread.buffer->track.tid = tid;
    this_thread.buffer->track.name =
        this_thread.name.empty() ? default_thread_name(tid) : this_thread.name;
  }
  ThreadBuffer& buffer = *this_thread.buffer;
  {
    std::lock_guard lock(buffer.mutex);
    if (buffer.session == session) return &buffer;
  }
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (r.session != session) return nullptr;  // stopped meanwhile
  std::lock_guard buffer_lock(buffer.mutex);
  buffer.session = session;
  buffer.track.events.clear();
  r.buffers.push_back(this_thread.buffer);
  return &buffer;
}

// Spans of `deferred` on tracks of their own, numbered after every real thread id (Linux ids
// stay below 2^22).
std::vector<Track> resolve_spans(std::vector<DeferredSpan> deferred) {
  constexpr int64_t kFirstSpanTrack = int64_t{1} << 30;
  std::vector<Track> tracks;
  for (DeferredSpan& span : deferred) {
    SpanTimes times;
    try {
      times = span.resolve();
    } catch (const std::exception&) {
      continue;  // a collective that failed: its error surfaced where it was waited for
    }
    if (!times || times->first == Clock::time_point{} || times->second < times->first) continue;
    auto track = std::find_if(tracks.begin(), tracks.end(),
                              [&](const Track& t) { return t.name == span.track; });
    if (track == tracks.end()) {
      tracks.push_back({kFirstSpanTrack + static_cast<int64_t>(tracks.size()), span.track, {}});
      track = tracks.end() - 1;
    }
    track->events.push_back({.name = intern(span.name),
                             .category = span.category,
                             .begin_ns = ns_of(times->first),
                             .end_ns = ns_of(times->second),
                             .args = std::move(span.args)});
  }
  for (Track& track : tracks) {
    std::stable_sort(track.events.begin(), track.events.end(),
                     [](const Event& a, const Event& b) { return a.begin_ns < b.begin_ns; });
  }
  return tracks;
}

}  // namespace

const char* category_name(Category category) {
  switch (category) {
    case Category::Op: return "cpu_op";
    case Category::Backward: return "autograd";
    case Category::Step: return "user_annotation";
    case Category::Communication: return "communication";
    case Category::Annotation: return "user_annotation";
  }
  return "cpu_op";
}

const char* intern(const std::string& name) {
  static std::mutex mutex;
  static std::unordered_set<std::string> names;  // nodes never move: their c_str() stays valid
  std::lock_guard lock(mutex);
  return names.insert(name).first->c_str();
}

void set_thread_name(std::string name) {
  if (this_thread.buffer) {
    std::lock_guard lock(this_thread.buffer->mutex);
    this_thread.buffer->track.name = name;
  }
  this_thread.name = std::move(name);
}

void RecordScope::begin(const char* name, Category category, double flops) {
  ThreadBuffer* buffer = enrolled_buffer();
  if (buffer == nullptr) return;
  const int64_t now = now_ns();
  std::lock_guard lock(buffer->mutex);
  if (buffer->session == 0) return;  // the Recording stopped after enrolled_buffer()
  session_ = buffer->session;
  index_ = buffer->track.events.size();
  buffer->track.events.push_back(
      {.name = name, .category = category, .begin_ns = now, .flops = flops});
  buffer_ = buffer;
}

void RecordScope::end() noexcept {
  const int64_t now = now_ns();
  std::lock_guard lock(buffer_->mutex);
  // A scope opened under a Recording that has stopped since is dropped (Note [Profiler threads]).
  if (buffer_->session != session_ || index_ >= buffer_->track.events.size()) return;
  buffer_->track.events[index_].end_ns = now;
}

void record_deferred_span(const std::string& track, std::string name, Category category,
                          std::vector<Arg> args, std::function<SpanTimes()> resolve) {
  if (!enabled()) return;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (r.session == 0) return;
  r.deferred.push_back({track, std::move(name), category, std::move(args), std::move(resolve)});
}

Recording::Recording() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  TANDEM_CHECK(r.session == 0,
               "[profiler] a recording is already running in this process; stop it first");
  r.session = ++r.sessions;
  r.begin_ns = now_ns();
  r.buffers.clear();
  r.deferred.clear();
  current_session.store(r.session, std::memory_order_release);
  detail::recording.store(true, std::memory_order_relaxed);
}

Recording::~Recording() {
  if (!stopped_) stop();
}

Profile Recording::stop() {
  Profile profile;
  if (stopped_) return profile;
  stopped_ = true;
  detail::recording.store(false, std::memory_order_relaxed);
  current_session.store(0, std::memory_order_release);
  std::vector<DeferredSpan> deferred;
  {
    // Under the registry's lock, so that no thread enrols in a next Recording meanwhile.
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    r.session = 0;
    profile.begin_ns = r.begin_ns;
    profile.end_ns = now_ns();
    profile.pid = static_cast<int64_t>(::getpid());
    for (const std::shared_ptr<ThreadBuffer>& buffer : r.buffers) {
      std::lock_guard buffer_lock(buffer->mutex);
      buffer->session = 0;
      Track track{buffer->track.tid, buffer->track.name, {}};
      // A thread may have opened or closed a scope since the stop began: what began after it is
      // not the recording's, and what was open at it ends there (Note [Profiler threads]).
      for (Event& event : buffer->track.events) {
        if (event.begin_ns >= profile.end_ns) continue;
        if (event.end_ns == 0 || event.end_ns > profile.end_ns) event.end_ns = profile.end_ns;
        track.events.push_back(std::move(event));
      }
      buffer->track.events.clear();
      if (!track.events.empty()) profile.tracks.push_back(std::move(track));
    }
    r.buffers.clear();
    deferred.swap(r.deferred);
  }
  for (Track& track : resolve_spans(std::move(deferred))) {
    profile.tracks.push_back(std::move(track));
  }
  return profile;
}

}  // namespace tandem::profiler
