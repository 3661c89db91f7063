#pragma once
/// A Profile as a per-op table (torch.profiler's key_averages().table()): calls, self and total
/// time, GFLOP/s where the op counted its FLOPs, and the share of the profiled steps' time.
///
/// Note [Self time]: a call's self time is its time less that of the calls it made (on its
/// thread: scopes nest), so on the thread that ran the steps the ops' self times and the row
/// "(in a step, not in an op)" add up to the steps' time, and their shares to 100 %. Total time
/// counts the outermost call of a name only, so an op that calls itself is not counted twice.
/// Other threads (autograd workers of other devices, DataParallel replicas, loader threads) and
/// span tracks (DDP's all-reduces) run beside the steps: each gets a table of its own, its shares
/// also of the steps' time, which is how much of it that thread was busy.

#include <string>
#include <vector>

#include "engine/profiler.h"

namespace tandem::profiler {

/// One op's calls on one thread, summed over the profiled steps.
struct OpTotals {
  std::string name{};
  Category category = Category::Op;
  int64_t calls = 0;
  double self_ms = 0;   ///< Note [Self time]
  double total_ms = 0;  ///< including what it called; outermost calls only
  double flops = 0;     ///< 0: not counted
};

struct ThreadTotals {
  std::string thread{};
  std::vector<OpTotals> ops{};  ///< largest self time first
  double busy_ms = 0;           ///< the ops' self time, summed
};

struct ProfileSummary {
  /// Steps (Category::Step events) of the thread that ran them; 0 without steps, when the whole
  /// recording of the first thread counts as one.
  int64_t steps = 0;
  double step_ms = 0;           ///< the steps' time, summed
  double between_steps_ms = 0;  ///< from the first step's start to the last's end, outside steps
  ThreadTotals step_thread{};   ///< its ops within the steps
  double outside_ops_ms = 0;    ///< of the steps' time, in no op (Note [Self time])
  std::vector<ThreadTotals> other_threads{};  ///< busy during the steps, busiest first
  double flops = 0;                           ///< counted within the steps, on every thread
};

ProfileSummary summarize(const Profile& profile);

/// The summary as Markdown: a header line, the step thread's table, then one per other thread.
std::string format_table(const ProfileSummary& summary);

}  // namespace tandem::profiler
