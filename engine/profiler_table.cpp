#include "engine/profiler_table.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "engine/text_table.h"

namespace tandem::profiler {
namespace {

struct Window {
  int64_t begin_ns;
  int64_t end_ns;
};

/// One counted call and its self time (Note [Self time]).
struct Call {
  const Event* event;
  int64_t self_ns;
  int64_t length_ns;  ///< its duration, cut at its caller's end
  bool outermost;     ///< no caller of the same name
};

double ms(int64_t ns) {
  return static_cast<double>(ns) / 1e6;
}

bool starts_inside(const std::vector<Window>& windows, int64_t t) {
  return std::any_of(windows.begin(), windows.end(),
                     [t](const Window& w) { return t >= w.begin_ns && t < w.end_ns; });
}

// The calls of `track` that count, each with its self time: with `by_steps`, the steps and what
// ran inside them; otherwise the calls that start inside `windows`.
std::vector<Call> counted_calls(const Track& track, bool by_steps,
                                const std::vector<Window>& windows) {
  const std::vector<Event>& events = track.events;
  std::vector<size_t> order(events.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return events[a].begin_ns != events[b].begin_ns ? events[a].begin_ns < events[b].begin_ns
                                                    : events[a].end_ns > events[b].end_ns;
  });
  struct Open {
    const Event* event;
    int64_t end_ns;
    int64_t children_ns;
    bool counted;
    bool in_step;
    bool outermost;
  };
  std::vector<Open> stack;
  std::vector<Call> calls;
  const auto close = [&] {
    const Open open = stack.back();
    stack.pop_back();
    const int64_t length = open.end_ns - open.event->begin_ns;
    if (open.counted)
      calls.push_back({open.event, length - open.children_ns, length, open.outermost});
  };
  for (size_t i : order) {
    const Event& event = events[i];
    while (!stack.empty() && stack.back().end_ns <= event.begin_ns) close();
    const int64_t end = stack.empty() ? event.end_ns : std::min(event.end_ns, stack.back().end_ns);
    if (!stack.empty()) stack.back().children_ns += end - event.begin_ns;
    const bool in_step =
        event.category == Category::Step || (!stack.empty() && stack.back().in_step);
    const bool outermost = std::none_of(stack.begin(), stack.end(), [&](const Open& o) {
      return std::strcmp(o.event->name, event.name) == 0;
    });
    const bool counted = by_steps ? in_step : starts_inside(windows, event.begin_ns);
    stack.push_back({&event, end, 0, counted, in_step, outermost});
  }
  while (!stack.empty()) close();
  return calls;
}

// Sums calls by name (steps left out), largest self time first; adds their FLOPs to `flops`.
ThreadTotals totals_of(const std::string& thread, const std::vector<Call>& calls, double& flops) {
  ThreadTotals totals{.thread = thread};
  for (const Call& call : calls) {
    const Event& event = *call.event;
    if (event.category == Category::Step) continue;
    auto op = std::find_if(totals.ops.begin(), totals.ops.end(),
                           [&](const OpTotals& o) { return o.name == event.name; });
    if (op == totals.ops.end()) {
      totals.ops.push_back({.name = event.name, .category = event.category});
      op = totals.ops.end() - 1;
    }
    op->calls += 1;
    op->self_ms += ms(call.self_ns);
    if (call.outermost) op->total_ms += ms(call.length_ns);
    op->flops += event.flops;
    flops += event.flops;
    totals.busy_ms += ms(call.self_ns);
  }
  std::stable_sort(totals.ops.begin(), totals.ops.end(),
                   [](const OpTotals& a, const OpTotals& b) { return a.self_ms > b.self_ms; });
  return totals;
}

// The track whose events include the most steps, or the first track when none has any.
size_t step_track(const Profile& profile) {
  size_t best = 0;
  int64_t most = 0;
  for (size_t t = 0; t < profile.tracks.size(); ++t) {
    const auto& events = profile.tracks[t].events;
    const auto steps = std::count_if(events.begin(), events.end(),
                                     [](const Event& e) { return e.category == Category::Step; });
    if (steps > most) {
      best = t;
      most = steps;
    }
  }
  return best;
}

}  // namespace

ProfileSummary summarize(const Profile& profile) {
  ProfileSummary summary;
  if (profile.tracks.empty()) return summary;
  const size_t main = step_track(profile);
  const Track& track = profile.tracks[main];
  std::vector<Window> windows;
  for (const Event& event : track.events) {
    if (event.category == Category::Step) windows.push_back({event.begin_ns, event.end_ns});
  }
  summary.steps = static_cast<int64_t>(windows.size());
  if (windows.empty()) windows.push_back({profile.begin_ns, profile.end_ns});
  for (const Window& w : windows) summary.step_ms += ms(w.end_ns - w.begin_ns);
  summary.between_steps_ms = ms(windows.back().end_ns - windows.front().begin_ns) - summary.step_ms;
  const std::vector<Call> calls = counted_calls(track, summary.steps > 0, windows);
  summary.step_thread = totals_of(track.name, calls, summary.flops);
  summary.outside_ops_ms = summary.step_ms - summary.step_thread.busy_ms;
  for (size_t t = 0; t < profile.tracks.size(); ++t) {
    if (t == main) continue;
    const Track& other = profile.tracks[t];
    ThreadTotals totals =
        totals_of(other.name, counted_calls(other, false, windows), summary.flops);
    if (!totals.ops.empty()) summary.other_threads.push_back(std::move(totals));
  }
  std::stable_sort(
      summary.other_threads.begin(), summary.other_threads.end(),
      [](const ThreadTotals& a, const ThreadTotals& b) { return a.busy_ms > b.busy_ms; });
  return summary;
}

namespace {

std::vector<std::string> op_row(const OpTotals& op, double step_ms) {
  const std::string rate = op.flops > 0 && op.total_ms > 0
                               ? format_text("%.1f", op.flops / (op.total_ms * 1e6))
                               : std::string("-");
  return {op.name,
          std::to_string(op.calls),
          format_text("%.2f", op.self_ms),
          format_text("%.2f", op.total_ms),
          rate,
          format_text("%.1f %%", 100 * op.self_ms / step_ms)};
}

std::string thread_table(const ThreadTotals& thread, double step_ms, const char* outside_label,
                         double outside_ms) {
  TextTable table({"op", "calls", "self ms", "total ms", "GFLOP/s", "% of step"});
  for (const OpTotals& op : thread.ops) table.add(op_row(op, step_ms));
  if (outside_label != nullptr) {
    table.add({outside_label, "", format_text("%.2f", outside_ms), "", "",
               format_text("%.1f %%", 100 * outside_ms / step_ms)});
  }
  return table.markdown();
}

}  // namespace

std::string format_table(const ProfileSummary& s) {
  const double step_ms = std::max(s.step_ms, 1e-9);
  const int64_t steps = std::max<int64_t>(1, s.steps);
  std::string text =
      s.steps > 0 ? format_text(
                        "Profile of %lld steps on thread \"%s\": %.2f ms per step, %.2f ms in "
                        "all; %.2f ms between the steps (not in the table)\n",
                        static_cast<long long>(s.steps), s.step_thread.thread.c_str(),
                        s.step_ms / steps, s.step_ms, s.between_steps_ms)
                  : format_text("Profile of thread \"%s\" (no steps marked): %.2f ms\n",
                                s.step_thread.thread.c_str(), s.step_ms);
  if (s.flops > 0) {
    text += format_text(
        "FLOPs counted (convolutions and matrix products): %.3f GFLOP per step, "
        "%.1f GFLOP/s over the steps' time\n",
        s.flops / 1e9 / static_cast<double>(steps), s.flops / (step_ms * 1e6));
  }
  text +=
      "self: in the op, less the ops it called; total: with them; % of step: self time / "
      "the steps' time\n\n";
  text += thread_table(s.step_thread, step_ms, "(in a step, not in an op)", s.outside_ops_ms);
  for (const ThreadTotals& thread : s.other_threads) {
    text += format_text(
        "\nThread \"%s\", beside the steps: busy %.2f ms, %.1f %% of the steps' time\n\n",
        thread.thread.c_str(), thread.busy_ms, 100 * thread.busy_ms / step_ms);
    text += thread_table(thread, step_ms, nullptr, 0);
  }
  return text;
}

}  // namespace tandem::profiler
