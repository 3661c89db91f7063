#include "apps/common/step_profiler.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "apps/common/output_paths.h"
#include "engine/error.h"
#include "engine/profiler_table.h"
#include "engine/profiler_trace.h"

namespace tandem::apps {

void prepare_profile_dir(const std::string& program, const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  TANDEM_CHECK(!error, "[", program, "] --profile: cannot create the folder ", dir, ": ",
               error.message());
  check_output_path(program, "--profile",
                    (std::filesystem::path(dir) / (program + ".trace.json")).string());
}

StepProfiler::StepProfiler(StepProfilerOptions options) : options_(std::move(options)) {
  if (options_.steps > 0) prepare_profile_dir(options_.program, options_.dir);
}

std::string StepProfiler::trace_path() const {
  return (std::filesystem::path(options_.dir) / (options_.stem + ".trace.json")).string();
}

std::string StepProfiler::table_path() const {
  return (std::filesystem::path(options_.dir) / (options_.stem + ".ops.md")).string();
}

void StepProfiler::begin_step() {
  const int64_t step = begun_++;
  if (options_.steps <= 0 || step < options_.wait || recorded_ >= options_.steps) return;
  if (!recording_) recording_.emplace();
  step_.emplace([step] { return "ProfilerStep#" + std::to_string(step); },
                profiler::Category::Step);
}

void StepProfiler::end_step() {
  if (!step_) return;
  if (options_.synchronize) options_.synchronize();  // Note [Profile window]
  step_.reset();
  if (++recorded_ == options_.steps) write(false);
}

void StepProfiler::finish() {
  step_.reset();
  if (recording_) write(true);
}

void StepProfiler::write(bool cut_short) {
  const profiler::Profile profile = recording_->stop();
  recording_.reset();
  std::string table;
  if (cut_short) {
    table += "Training ended after " + std::to_string(recorded_) + " of the " +
             std::to_string(options_.steps) + " steps to profile.\n";
  }
  if (options_.gpu) {
    table +=
        "On the GPU an op's time here is the host's, queueing its kernels, as PyTorch's \"CPU "
        "time\"; the steps' times are the GPU's (synchronized). Per-op GPU times: run with "
        "CUDA_LAUNCH_BLOCKING=1.\n";
  }
  table += profiler::format_table(profiler::summarize(profile));
  profiler::write_chrome_trace(profile, trace_path(), options_.process);
  std::ofstream out(table_path());
  out << table;
  TANDEM_CHECK(out.good(), "[", options_.program, "] cannot write ", table_path());
  if (options_.print) {
    std::printf(
        "\n%s\nprofile: the table is in %s; the trace in %s (open it in "
        "https://ui.perfetto.dev or chrome://tracing)\n\n",
        table.c_str(), table_path().c_str(), trace_path().c_str());
    std::fflush(stdout);
  }
}

}  // namespace tandem::apps
