// The terminal side of bench_cifar's report (apps/bench_cifar/report.h): Markdown tables.
#include <algorithm>
#include <cmath>

#include "apps/bench_cifar/repeats.h"
#include "apps/bench_cifar/report.h"
#include "engine/text_table.h"

namespace tandem::apps::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string device_cell(const BenchRow& row) {
  const Measurement& m = *row.measured;
  const char* layout = m.memory_format == MemoryFormat::ChannelsLast ? "nhwc" : "nchw";
  if (row.config.mode == Mode::Distributed) {
    return format_text("%s %s, %dx%d thr", m.device.c_str(), layout, m.processes,
                       m.threads_per_process);
  }
  return format_text("%s %s, %d thr", m.device.c_str(), layout, m.threads_per_process);
}

std::string metric_cell(Cell cell, double value) {
  switch (cell) {
    case Cell::None: break;
    case Cell::Decimal: return format_text("%.1f", value);
    case Cell::Ratio: return format_text("%.2f", value);
    case Cell::Percent: return format_text("%.0f %%", 100 * value);
    case Cell::MiB: return format_text("%.2f", value / kMiB);
    case Cell::Whole: return format_text("%.0f", value);
  }
  return "";
}

// The median images/s, and the min–max of its repeats when there were several:
// "1234.5 (1180–1260)".
std::string images_per_s_cell(const BenchRow& row) {
  std::string cell = metric_cell(Cell::Decimal, row.measured->images_per_s);
  if (row.images_per_s_samples.size() > 1) {
    const Spread spread = images_per_s_spread(row);
    cell += format_text(" (%.0f–%.0f)", spread.min, spread.max);
  }
  return cell;
}

std::vector<std::string> measured_cells(const BenchRow& row) {
  std::vector<std::string> cells{row.config.label(), device_cell(row)};
  for (const Metric& metric : kMetrics) {
    if (metric.cell == Cell::None) continue;
    const double value = row.measured.value().*metric.field;
    const bool shown = applies(metric, row.config.mode) && !std::isnan(value);
    if (shown && metric.field == &Measurement::images_per_s) {
      cells.push_back(images_per_s_cell(row));
    } else {
      cells.push_back(shown ? metric_cell(metric.cell, value) : "-");
    }
  }
  return cells;
}

void print_profiles(std::FILE* out, const ProjectionReport& report) {
  std::fprintf(out,
               "\nMeasured one-device profiles (DDP world size 1; backward without the "
               "end-of-backward wait):\n");
  TextTable table({"per-GPU batch", "forward ms", "backward ms", "optimizer ms", "buckets",
                   "parameters MiB", "bucket ready ms (before end of backward)"});
  for (const ComputeProfile& p : report.profiles) {
    std::string ready;
    for (const BucketReady& b : p.buckets) {
      if (!ready.empty()) ready += ' ';
      ready += format_text("%.1f", b.ready_ms);
    }
    table.add({std::to_string(p.batch), format_text("%.1f", p.forward_ms),
               format_text("%.1f", p.backward_ms), format_text("%.1f", p.optimizer_ms),
               std::to_string(p.buckets.size()), format_text("%.2f", p.parameter_bytes / kMiB),
               ready});
  }
  std::fputs(table.markdown().c_str(), out);
}

}  // namespace

void print_table(std::FILE* out, const BenchOptions& o, const RunInfo& info,
                 const std::vector<BenchRow>& rows) {
  std::fprintf(out,
               "bench_cifar: %s, %s data, %d warm-up + %d timed steps, %s, %d threads in all, "
               "ddp buckets %g MiB (first %g MiB); %s (%d CPUs)%s, load average %.2f, %s, Tandem "
               "%s\n\n",
               o.setup.arch.c_str(), o.real ? "CIFAR-10" : "synthetic", o.warmup, o.steps,
               o.repeats > 1 ? format_text("median of %d repeats", o.repeats).c_str() : "1 run",
               info.threads, o.setup.ddp.reducer.bucket_cap_mb,
               std::min(o.setup.ddp.reducer.first_bucket_mb, o.setup.ddp.reducer.bucket_cap_mb),
               info.cpu.c_str(), info.cpus, info.cuda ? ", GPUs present" : ", no GPU",
               info.load_average, info.date.c_str(), info.version.c_str());
  if (info.conv_peak) {
    const ConvPeak& peak = *info.conv_peak;
    std::fprintf(out, "convolution peak (%s, threads %d, fastest call): fp32 %.0f GFLOP/s",
                 peak.convolution.c_str(), peak.threads, peak.float32_gflops);
    if (peak.bfloat16_gflops) std::fprintf(out, ", bf16 %.0f GFLOP/s", *peak.bfloat16_gflops);
    if (!peak.bfloat16_note.empty()) std::fprintf(out, "; bf16 %s", peak.bfloat16_note.c_str());
    std::fprintf(out, "\n\n");
  }
  std::vector<std::string> header{"config", "device"};
  for (const Metric& metric : kMetrics) {
    if (metric.cell != Cell::None) header.emplace_back(metric.heading);
  }
  TextTable table(header);
  for (const BenchRow& row : rows) {
    if (row.measured) {
      table.add(measured_cells(row));
    } else {
      table.add_note(row.config.label(), "FAILED: " + row.error);
    }
  }
  std::fputs(table.markdown().c_str(), out);
  std::fprintf(
      out,
      "\nimages/s: the median of the configuration's --repeats runs (their min–max). "
      "speed-up, eff.: median images/s against one device at the same global batch (the single "
      "row, else the same mode's x1 row), and that / devices. comm: DDP all-reduce ms per "
      "step, hidden: the share that ran while backward was going. scatter … reduce: "
      "DataParallel ms per step. GFLOP/s: images/s x the FLOPs of an image's training step (2 "
      "per multiply-add of the convolutions and matrix products that run, forward and "
      "backward); %% of peak: of the convolution peak above in the row's precision. peak RSS: "
      "per process; ddp: the largest rank.\n");
}

void print_projection(std::FILE* out, const BenchOptions& o, const ProjectionReport& report) {
  std::fprintf(out, "\nPROJECTION (not measured): %s on multi-GPU nodes\n", o.setup.arch.c_str());
  std::fprintf(out, "  compute: as measured on %s at each per-GPU batch (global batch fixed)\n",
               report.compute_device.empty() ? "?" : report.compute_device.c_str());
  std::string links;
  for (const LinkModel& link : report.links) {
    links +=
        format_text("%s%s %g GB/s", links.empty() ? "" : ", ", link.name.c_str(), link.bus_gbps);
  }
  std::fprintf(out,
               "  communication: ring all-reduce 2(n-1)/n x bytes / bus bandwidth + latency; %s; "
               "latency %g us\n",
               links.c_str(), o.latency_us);
  std::fprintf(out,
               "  ddp: buckets all-reduced in order as they become ready; step = compute + the "
               "communication still running after backward\n");
  std::fprintf(out,
               "  dp: scatter + broadcast parameters + compute of batch/n + reduce gradients after "
               "backward + gather (nothing overlapped)\n\n");
  TextTable table({"link", "mode", "GPUs", "batch", "per GPU", "compute ms", "comm ms",
                   "exposed ms", "step ms", "images/s", "speed-up", "eff."});
  for (const ProjectionRow& row : report.rows) {
    const ProjectedStep& s = row.step;
    table.add({row.link, mode_name(s.mode), std::to_string(s.gpus), std::to_string(s.global_batch),
               std::to_string(s.local_batch), format_text("%.2f", s.compute_ms),
               format_text("%.3f", s.comm_ms), format_text("%.3f", s.exposed_ms),
               format_text("%.2f", s.step_ms), format_text("%.0f", s.images_per_s),
               format_text("%.2f", s.speedup), format_text("%.0f %%", 100 * s.efficiency)});
  }
  std::fputs(table.markdown().c_str(), out);
  print_profiles(out, report);
  for (const std::string& note : report.notes) std::fprintf(out, "note: %s\n", note.c_str());
}

void print_warnings(std::FILE* out, const RunInfo& info, const std::vector<BenchRow>& rows) {
  for (const BenchRow& row : rows) {
    if (!row.measured) continue;
    // 5 % above perfect is beyond any timer's noise: the row it was compared with was slowed.
    if (row.measured->efficiency > 1.05) {
      std::fprintf(out,
                   "bench_cifar: warning: %s shows %.0f %% scaling efficiency, which no scaling "
                   "gives: the machine was busy (load average %.2f at the start on %d CPUs); "
                   "rerun it idle before trusting the ratios\n",
                   row.config.label().c_str(), 100 * row.measured->efficiency, info.load_average,
                   info.cpus);
    }
    const Spread spread = images_per_s_spread(row);
    if (spread.relative() > kSpreadWarning) {
      std::fprintf(out,
                   "bench_cifar: warning: %s varied by %.0f %% over its %zu repeats (%.0f–%.0f "
                   "images/s; load average %.2f at the start on %d CPUs): a busy machine or too "
                   "few --steps, so its median is a rough guess\n",
                   row.config.label().c_str(), 100 * spread.relative(),
                   row.images_per_s_samples.size(), spread.min, spread.max, info.load_average,
                   info.cpus);
    }
  }
}

}  // namespace tandem::apps::bench
