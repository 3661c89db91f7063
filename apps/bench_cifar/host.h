#pragma once
/// Facts about the machine and process that a benchmark report states next to its numbers.

#include <string>

namespace tandem::apps::bench {

/// Peak resident set size of this process so far, MiB (getrusage's ru_maxrss).
double peak_rss_mb();

/// The CPU's model name from /proc/cpuinfo, or "unknown CPU".
std::string cpu_model();

/// Logical CPUs this process may run on.
int cpu_count();

/// Local date and time, "2026-11-23 14:05".
std::string local_date_time();

}  // namespace tandem::apps::bench
