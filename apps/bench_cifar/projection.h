#pragma once
/// The scaling projection of bench_cifar: the step time of DDP and of DataParallel on N GPUs,
/// predicted from one measured device and a bandwidth/latency model of the link between the GPUs.
/// Pure arithmetic, no measuring, so tests can check it on hand-computed cases.
///
/// Note [Ring all-reduce model]: a ring all-reduce of b bytes over n GPUs sends and receives
/// 2(n−1)/n × b bytes per GPU (reduce-scatter, then all-gather), so it takes
///     2(n−1)/n × b / bus_bandwidth + latency,
/// where bus_bandwidth is what nccl-tests reports as "busbw" (the same per-link figure for any n)
/// and latency is a fixed cost per collective. One GPU communicates nothing.
///
/// Note [Bucket schedule]: DDP launches the buckets' all-reduces in bucket order, one at a time
/// (Note [Launch order] in parallel/reducer.cpp): bucket k starts at max(its ready time, the end of
/// bucket k−1). Times are relative to the end of backward (ready times ≤ 0); whatever runs past
/// 0 is exposed, the rest is hidden behind backward.
///
/// Note [DataParallel model]: one process drives all GPUs, as in PyTorch: scatter the inputs from
/// GPU 0, broadcast the parameters to the n−1 replicas, run forward and backward of batch/n on
/// every replica at once, reduce all gradients onto GPU 0 after backward (not overlapped), gather
/// the outputs. Pipelined broadcast and reduce move b bytes in about b / bandwidth + latency,
/// whatever n is.

#include <cstdint>
#include <string>
#include <vector>

#include "apps/common/mode.h"

namespace tandem::apps::bench {

/// The interconnect between the GPUs.
struct LinkModel {
  std::string name = "nvlink";  ///< for the report
  double bus_gbps = 150.0;      ///< bus bandwidth per direction, GB/s (1 GB = 1e9 bytes)
  double latency_us = 20.0;     ///< fixed cost of every collective or transfer
};

/// A bucket of gradients: when its last gradient was ready (ms relative to the end of backward)
/// and its size.
struct BucketReady {
  double ready_ms = 0;
  double bytes = 0;
};

/// What one device measured for one training step at one batch size.
struct ComputeProfile {
  int64_t batch = 0;                 ///< images per step on this device
  double forward_ms = 0;             ///< forward and loss
  double backward_ms = 0;            ///< backward, without waiting for communication
  double optimizer_ms = 0;           ///< the SGD update
  std::vector<BucketReady> buckets;  ///< in launch order, from a DDP world-size-1 run
  double parameter_bytes = 0;
  double input_bytes_per_image = 3 * 32 * 32 * 4;  ///< float32 CIFAR image
  double output_bytes_per_image = 10 * 4;          ///< float32 logits

  double step_ms() const { return forward_ms + backward_ms + optimizer_ms; }
};

/// One projected configuration.
struct ProjectedStep {
  Mode mode = Mode::Distributed;  ///< ddp or dp
  int gpus = 1;
  int64_t global_batch = 0;
  int64_t local_batch = 0;  ///< per GPU
  double compute_ms = 0;    ///< forward + backward + optimizer on one GPU's share
  double comm_ms = 0;       ///< all communication, hidden or not
  double exposed_ms = 0;    ///< communication that lengthens the step
  double step_ms = 0;
  double images_per_s = 0;
  double speedup = 0;     ///< against one GPU at the same global batch
  double efficiency = 0;  ///< speedup / gpus
  // DataParallel's parts (0 for DDP).
  double scatter_ms = 0;
  double replicate_ms = 0;
  double reduce_ms = 0;
  double gather_ms = 0;
};

/// Where each bucket's all-reduce ran (Note [Bucket schedule]).
struct BucketSchedule {
  std::vector<double> started_ms;
  std::vector<double> ended_ms;
  double comm_ms = 0;     ///< summed all-reduce time
  double exposed_ms = 0;  ///< how far the last all-reduce ends after backward (≥ 0)
  double hidden_ms = 0;   ///< comm_ms − exposed_ms: ran while backward was still going
};

/// Note [Ring all-reduce model]; 0 for one GPU.
double ring_allreduce_ms(double bytes, int gpus, const LinkModel& link);
/// One pipelined transfer (broadcast, reduce, point-to-point) of `bytes`: bytes / bw + latency.
double transfer_ms(double bytes, const LinkModel& link);
/// Note [Bucket schedule]. overlap = false: every bucket waits for the end of backward.
BucketSchedule schedule_buckets(const std::vector<BucketReady>& buckets, int gpus,
                                const LinkModel& link, bool overlap = true);

/// DDP on `gpus` GPUs: `local` measured at the per-GPU batch, `one_gpu` at the whole batch.
ProjectedStep project_ddp(const ComputeProfile& local, const ComputeProfile& one_gpu, int gpus,
                          const LinkModel& link);
/// DataParallel on `gpus` GPUs (Note [DataParallel model]); the same inputs as project_ddp.
ProjectedStep project_dp(const ComputeProfile& local, const ComputeProfile& one_gpu, int gpus,
                         const LinkModel& link);

}  // namespace tandem::apps::bench
