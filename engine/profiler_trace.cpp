#include "engine/profiler_trace.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/error.h"

namespace tandem::profiler {
namespace {

using nlohmann::ordered_json;

double microseconds(int64_t ns) {
  return static_cast<double>(ns) / 1e3;
}

ordered_json metadata(const char* kind, int64_t pid, int64_t tid, const char* key,
                      const ordered_json& value) {
  return {{"ph", "M"}, {"name", kind}, {"pid", pid}, {"tid", tid}, {"args", {{key, value}}}};
}

ordered_json complete_event(const Event& event, int64_t pid, int64_t tid) {
  ordered_json args = ordered_json::object();
  if (event.flops > 0) args["GFLOP"] = event.flops / 1e9;
  for (const Arg& arg : event.args) args[arg.key] = arg.value;
  return {{"ph", "X"},
          {"cat", category_name(event.category)},
          {"name", event.name},
          {"pid", pid},
          {"tid", tid},
          {"ts", microseconds(event.begin_ns)},
          {"dur", microseconds(event.end_ns - event.begin_ns)},
          {"args", std::move(args)}};
}

}  // namespace

std::string chrome_trace_json(const Profile& profile, const std::string& process_name) {
  ordered_json events = ordered_json::array();
  events.push_back(metadata("process_name", profile.pid, 0, "name", process_name));
  for (size_t i = 0; i < profile.tracks.size(); ++i) {
    const Track& track = profile.tracks[i];
    events.push_back(metadata("thread_name", profile.pid, track.tid, "name", track.name));
    events.push_back(
        metadata("thread_sort_index", profile.pid, track.tid, "sort_index", static_cast<int>(i)));
  }
  for (const Track& track : profile.tracks) {
    for (const Event& event : track.events) {
      events.push_back(complete_event(event, profile.pid, track.tid));
    }
  }
  const ordered_json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  return trace.dump() + "\n";
}

void write_chrome_trace(const Profile& profile, const std::string& path,
                        const std::string& process_name) {
  std::ofstream out(path);
  out << chrome_trace_json(profile, process_name);
  TANDEM_CHECK(out.good(), "[profiler] cannot write ", path);
}

}  // namespace tandem::profiler
