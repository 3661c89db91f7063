#include "apps/bench_cifar/projection.h"

#include <algorithm>

#include "engine/error.h"

namespace tandem::apps::bench {
namespace {

// GB/s → bytes per millisecond.
double bytes_per_ms(const LinkModel& link) {
  return link.bus_gbps * 1e9 / 1e3;
}

void check_link(const LinkModel& link) {
  TANDEM_CHECK(link.bus_gbps > 0 && link.latency_us >= 0, "[bench_cifar] link ", link.name,
               " needs a positive bandwidth and a latency >= 0, got ", link.bus_gbps, " GB/s and ",
               link.latency_us, " us");
}

// Throughput and scaling against one GPU running the whole batch.
void finish(ProjectedStep& step, const ComputeProfile& one_gpu) {
  step.images_per_s = static_cast<double>(step.global_batch) / (step.step_ms / 1e3);
  step.speedup = one_gpu.step_ms() / step.step_ms;
  step.efficiency = step.speedup / step.gpus;
}

ProjectedStep start(Mode mode, const ComputeProfile& local, const ComputeProfile& one_gpu,
                    int gpus) {
  TANDEM_CHECK(gpus >= 1, "[bench_cifar] cannot project onto ", gpus, " GPUs");
  TANDEM_CHECK(local.step_ms() > 0 && one_gpu.step_ms() > 0,
               "[bench_cifar] the projection needs measured step times");
  ProjectedStep step;
  step.mode = mode;
  step.gpus = gpus;
  step.global_batch = one_gpu.batch;
  step.local_batch = local.batch;
  step.compute_ms = local.step_ms();
  return step;
}

}  // namespace

double ring_allreduce_ms(double bytes, int gpus, const LinkModel& link) {
  check_link(link);
  if (gpus <= 1) return 0;
  const double traffic = 2.0 * (gpus - 1) / gpus * bytes;
  return traffic / bytes_per_ms(link) + link.latency_us / 1e3;
}

double transfer_ms(double bytes, const LinkModel& link) {
  check_link(link);
  return bytes / bytes_per_ms(link) + link.latency_us / 1e3;
}

BucketSchedule schedule_buckets(const std::vector<BucketReady>& buckets, int gpus,
                                const LinkModel& link, bool overlap) {
  BucketSchedule schedule;
  double previous_end = -1e300;  // nothing runs before the first bucket
  for (const BucketReady& bucket : buckets) {
    const double ready = overlap ? bucket.ready_ms : std::max(0.0, bucket.ready_ms);
    const double start = std::max(ready, previous_end);
    const double duration = ring_allreduce_ms(bucket.bytes, gpus, link);
    schedule.started_ms.push_back(start);
    schedule.ended_ms.push_back(start + duration);
    schedule.comm_ms += duration;
    schedule.hidden_ms += std::max(0.0, std::min(start + duration, 0.0) - start);
    previous_end = start + duration;
  }
  // Every bucket is ready by the end of backward, so after 0 they run back to back: what is not
  // hidden is exactly the overhang of the last one.
  schedule.exposed_ms = buckets.empty() ? 0 : std::max(0.0, previous_end);
  return schedule;
}

ProjectedStep project_ddp(const ComputeProfile& local, const ComputeProfile& one_gpu, int gpus,
                          const LinkModel& link) {
  ProjectedStep step = start(Mode::Distributed, local, one_gpu, gpus);
  const BucketSchedule schedule = schedule_buckets(local.buckets, gpus, link);
  step.comm_ms = schedule.comm_ms;
  step.exposed_ms = schedule.exposed_ms;
  step.step_ms = step.compute_ms + step.exposed_ms;
  finish(step, one_gpu);
  return step;
}

ProjectedStep project_dp(const ComputeProfile& local, const ComputeProfile& one_gpu, int gpus,
                         const LinkModel& link) {
  ProjectedStep step = start(Mode::DataParallel, local, one_gpu, gpus);
  if (gpus > 1) {
    // GPU 0 keeps its own share and sends (or receives) the other (n−1)/n.
    const double others = static_cast<double>(gpus - 1) / gpus;
    const auto batch = static_cast<double>(one_gpu.batch);
    step.scatter_ms = transfer_ms(others * batch * local.input_bytes_per_image, link);
    step.replicate_ms = transfer_ms(local.parameter_bytes, link);
    step.reduce_ms = transfer_ms(local.parameter_bytes, link);
    step.gather_ms = transfer_ms(others * batch * local.output_bytes_per_image, link);
  }
  step.comm_ms = step.scatter_ms + step.replicate_ms + step.reduce_ms + step.gather_ms;
  step.exposed_ms = step.comm_ms;  // nothing overlaps in DataParallel
  step.step_ms = step.compute_ms + step.exposed_ms;
  finish(step, one_gpu);
  return step;
}

}  // namespace tandem::apps::bench
