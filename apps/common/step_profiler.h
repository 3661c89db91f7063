#pragma once
/// --profile: records a window of training steps with the profiler (engine/profiler.h) and writes
/// what torch.profiler users open: a per-op table (printed, and saved as Markdown) and a Chrome
/// trace for https://ui.perfetto.dev or chrome://tracing. One trace per process, so a ddp job
/// writes one per rank.
///
///   StepProfiler profile({.steps = 5, .dir = "profile", .stem = "train_cifar.rank0", ...});
///   for (each step) { profile.begin_step(); ...forward, backward, optimizer...;
///   profile.end_step(); } profile.finish();
///
/// Note [Profile window]: the window opens after `wait` steps (PyTorch's
/// torch.profiler.schedule(wait=2, active=steps)): the first steps allocate, create oneDNN's
/// primitives and cuDNN's plans, and DDP rebuilds its buckets after the first, none of which the
/// steps after do. Each step is one event, ProfilerStep#N, from begin_step() to end_step(); what
/// happens between steps (fetching the next batch, host syncs) is in the trace but not in the
/// table's shares. On CUDA the ops' times are host times, when their kernels were queued (the
/// table says so): synchronize() ends every profiled step, so the steps' times are the GPU's.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "engine/profiler.h"

namespace tandem::apps {

struct StepProfilerOptions {
  int64_t wait = 2;                     ///< steps before the window (Note [Profile window])
  int64_t steps = 0;                    ///< steps recorded; 0: off
  std::string dir{};                    ///< created when missing
  std::string stem{};                   ///< files: stem.trace.json and stem.ops.md
  std::string process{};                ///< the process's name in the trace
  bool print = true;                    ///< print the table when it is written
  bool gpu = false;                     ///< the ops queue GPU kernels (Note [Profile window])
  std::function<void()> synchronize{};  ///< waits for the devices (empty: nothing to wait for)
  std::string program = "train_cifar";  ///< for messages
};

/// Creates `dir` when missing and checks that it takes files; one line "[program] --profile: ..."
/// otherwise.
void prepare_profile_dir(const std::string& program, const std::string& dir);

class StepProfiler {
 public:
  /// Checks now that the folder can take the files (one line otherwise).
  explicit StepProfiler(StepProfilerOptions options);

  void begin_step();
  /// Writes the files once the window's last step has ended.
  void end_step();
  /// Training is over: writes what was recorded if the window was cut short, saying so.
  void finish();

  std::string trace_path() const;
  std::string table_path() const;

 private:
  void write(bool cut_short);

  StepProfilerOptions options_;
  std::optional<profiler::Recording> recording_;
  std::optional<profiler::RecordScope> step_;
  int64_t begun_ = 0;     ///< steps begun, in the window or not
  int64_t recorded_ = 0;  ///< steps ended in the window
};

}  // namespace tandem::apps
