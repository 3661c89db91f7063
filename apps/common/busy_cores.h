#pragma once
/// Whether other work keeps the machine's cores busy, and what that means for bf16.
///
/// Note [bf16 on busy cores]: measured (docs/benchmarks.md, "bf16 on a busy machine"), bf16 on
/// the CPU degrades far worse than fp32 when other processes share the cores, but only on more
/// than one thread: beside four busy loops on 2 cores, ResNet-20 on 2 threads ran bf16 at 0.28×
/// fp32 (0.65× quiet), on 1 thread at 0.92×. The profile puts the loss in oneDNN's bf16
/// backward-weights convolution (5-20× slower, the rest of the step 2-4×): its threads split
/// the batch and meet in oneDNN's own spin barrier to sum their partial weight gradients, and a
/// spinning thread holds its core while the thread it waits for is descheduled. OpenMP's wait
/// policy does not reach that barrier (GOMP_SPINCOUNT and OMP_WAIT_POLICY help fp32 there, not
/// bf16). So the programs say it before the first step, with the remedy, instead of guessing a
/// thread count: the load at start is a forecast, not a fact about the whole run.

#include <optional>
#include <string>

#include "nn/precision.h"

namespace tandem::apps {

/// The 1-minute load average, the first field of `loadavg_path`; nullopt when it cannot be read.
std::optional<double> read_load_average(const std::string& loadavg_path = "/proc/loadavg");

/// "<program>: warning: ..." when `precision` is bf16 on more than one thread and the load is at
/// least the number of cores (other work keeps them busy, Note [bf16 on busy cores]); else "".
std::string bf16_on_busy_cores_warning(const std::string& program, nn::Precision precision,
                                       int threads, double load, int cores);

}  // namespace tandem::apps
