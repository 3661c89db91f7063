#include "apps/bench_cifar/projection_report.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "apps/common/mode.h"
#include "engine/error.h"

namespace tandem::apps::bench {
namespace {

// A ddp x1 measurement at `batch` with overlap on: from the matrix when it has one, else run now.
BenchRow profile_row(const BenchOptions& options, const std::vector<BenchRow>& measured,
                     int64_t batch, WorkArea& area) {
  const BenchConfig wanted{.mode = Mode::Distributed,
                           .devices = 1,
                           .batch = batch,
                           .overlap = Overlap::On,
                           .compression = parallel::GradCompression::None};
  for (const BenchRow& row : measured) {
    if (row.config == wanted && row.measured) return row;
  }
  return run_config(options, wanted, area);
}

// The per-GPU batches the projection needs for one global batch; the others go to `notes`.
std::vector<int64_t> local_batches(const BenchOptions& o, int64_t batch,
                                   std::vector<std::string>& notes) {
  std::vector<int64_t> batches{batch};
  for (int gpus : o.project_gpus) {
    if (batch % gpus == 0) {
      batches.push_back(batch / gpus);
    } else {
      notes.push_back("batch " + std::to_string(batch) + " does not split evenly over " +
                      std::to_string(gpus) + " GPUs: not projected");
    }
  }
  return batches;
}

}  // namespace

std::vector<LinkModel> links_of(const BenchOptions& o) {
  std::vector<LinkModel> links;
  if (o.link != Link::Pcie) links.push_back({"nvlink", o.nvlink_gbps, o.latency_us});
  if (o.link != Link::NvLink) links.push_back({"pcie", o.pcie_gbps, o.latency_us});
  return links;
}

ComputeProfile profile_of(const Measurement& m, int64_t batch) {
  ComputeProfile profile;
  profile.batch = batch;
  profile.forward_ms = m.forward_ms;
  profile.backward_ms = std::max(0.0, m.backward_ms - m.wait_ms);
  profile.optimizer_ms = m.optimizer_ms;
  profile.parameter_bytes = m.parameter_bytes;
  for (const BucketStat& b : m.buckets) profile.buckets.push_back({b.ready_ms, b.bytes});
  return profile;
}

std::string superlinear_note(const std::vector<ProjectionRow>& rows) {
  const ProjectionRow* highest = nullptr;
  int over = 0;
  for (const ProjectionRow& row : rows) {
    if (row.step.efficiency <= 1.0) continue;
    ++over;
    if (highest == nullptr || row.step.efficiency > highest->step.efficiency) highest = &row;
  }
  if (highest == nullptr) return "";
  const ProjectedStep& step = highest->step;
  return detail::concat(
      over, over == 1 ? " projected row has" : " projected rows have",
      " an efficiency over 100 % (up to ", std::lround(100 * step.efficiency),
      " %: ", mode_name(step.mode), " on ", step.gpus, " GPUs at batch ", step.global_batch,
      " over ", highest->link, "): the per-GPU batch of ", step.local_batch,
      " computed faster per image than the whole batch on one device, which the "
      "projection carries over (Note [Projection profiles]); read those rows as an upper bound");
}

ProjectionReport build_projection(const BenchOptions& o, const std::vector<BenchRow>& measured,
                                  WorkArea& area) {
  ProjectionReport report;
  report.links = links_of(o);
  std::map<int64_t, ComputeProfile> profiles;  // by per-GPU batch
  for (int64_t batch : o.batch_sizes) {
    for (int64_t local : local_batches(o, batch, report.notes)) {
      if (profiles.count(local)) continue;
      const BenchRow row = profile_row(o, measured, local, area);
      if (!row.measured) {
        report.notes.push_back("profile at batch " + std::to_string(local) +
                               " failed: " + row.error);
        continue;
      }
      report.compute_device = row.measured->device + " (" +
                              std::to_string(row.measured->threads_per_process) + " threads)";
      profiles[local] = profile_of(*row.measured, local);
    }
  }
  for (const auto& [local, profile] : profiles) report.profiles.push_back(profile);
  for (const LinkModel& link : report.links) {
    for (int64_t batch : o.batch_sizes) {
      if (!profiles.count(batch)) continue;
      for (int gpus : o.project_gpus) {
        const auto local = profiles.find(batch / gpus);
        if (batch % gpus != 0 || local == profiles.end()) continue;
        report.rows.push_back({link.name, project_ddp(local->second, profiles[batch], gpus, link)});
        report.rows.push_back({link.name, project_dp(local->second, profiles[batch], gpus, link)});
      }
    }
  }
  const std::string superlinear = superlinear_note(report.rows);
  if (!superlinear.empty()) report.notes.push_back(superlinear);
  return report;
}

}  // namespace tandem::apps::bench
