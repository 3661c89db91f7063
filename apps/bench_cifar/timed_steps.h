#pragma once
/// bench_cifar's timed loop: the warm-up and timed training steps of one configuration, with each
/// step's phases timed on its devices.
///
/// Note [Phase timing]: a GPU's host queues work ahead of the device, and a launch-bound step
/// (ResNet-20 on a large GPU) takes about as long as queueing it; a host that waits for the
/// device to time each phase cannot queue the next one meanwhile, so the step is measured as
/// host time plus device time. The loop therefore synchronises twice (Note [Counting device
/// synchronisations]): before the timed steps, where the clock starts, and after them, where it
/// stops (images/s and ms/step come from that host time, as scripts/compare_pytorch.py times
/// PyTorch). In between it only leaves a timing mark (Note [Timing marks]) on every device at
/// each phase boundary, and reads them after the second synchronisation: a phase ends when its
/// last device has run it, so a boundary's time is the largest, over the devices, of the time
/// from the device's mark at the start of the timed steps. On the CPU a mark is the host clock,
/// which gives what timing with the host clock did. DDP's per-step bucket timings are taken
/// without waiting (ReducerTimer::take_step_record) and read once their all-reduces have ended, at
/// the latest after the second synchronisation. The last step's loss is read after it too.
/// --phase-sync synchronises after every phase as well: the phase times are then the host's,
/// the pre-2026-11-27 way, for comparing with old reports.

#include <cstdint>
#include <vector>

#include "apps/bench_cifar/measurement.h"
#include "apps/common/training_setup.h"
#include "data/dataset.h"
#include "parallel/comm/process_group.h"

namespace tandem::apps::bench {

struct TimedStepsOptions {
  int warmup = 2;           ///< untimed steps first
  int steps = 5;            ///< timed steps
  bool phase_sync = false;  ///< also wait for the devices after every phase (--phase-sync)
};

/// Runs options.warmup untimed and options.steps timed training steps (zero_grad, forward with
/// cross-entropy, backward, SGD), cycling through `pool` (each batch of the global `batch`'s
/// local share), and sets the timing fields of `m`: ms_per_step, images_per_s, the per-step
/// means of the phases and of the wrapper's timings (DataParallel's, DDP's), the buckets and
/// final_loss. With `group` (ddp) the ranks start the clock together, after a barrier.
void run_timed_steps(const TimedStepsOptions& options, int64_t batch, TrainingSetup& setup,
                     const std::vector<data::Batch>& pool, parallel::ProcessGroup* group,
                     Measurement& m);

}  // namespace tandem::apps::bench
