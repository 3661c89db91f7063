#include "apps/bench_cifar/runner.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include "apps/bench_cifar/repeats.h"
#include "apps/bench_cifar/worker.h"
#include "engine/error.h"
#include "parallel/comm/backends.h"
#include "parallel/launch/launcher.h"

namespace tandem::apps::bench {
namespace {

namespace fs = std::filesystem;

// A configuration that runs longer than this is stuck (a training step takes seconds).
constexpr std::chrono::minutes kConfigTimeout{60};

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string last_line(const std::string& text) {
  std::string line, last;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

// The first rank to fail usually says why; the others only see it vanish. Their error files are
// written as they fail, so the oldest is the cause.
std::string first_error(const fs::path& result, int ranks) {
  std::string message;
  fs::file_time_type oldest = fs::file_time_type::max();
  for (int rank = 0; rank < ranks; ++rank) {
    const fs::path file = error_file(result.string(), rank);
    std::error_code missing;
    const fs::file_time_type written = fs::last_write_time(file, missing);
    if (missing || written >= oldest) continue;
    oldest = written;
    message = read_text(file);
  }
  while (!message.empty() && message.back() == '\n') message.pop_back();
  return message;
}

// Why a worker job failed, in one line.
std::string failure_of(const parallel::LaunchResult& launched, const fs::path& result,
                       const fs::path& log, int ranks) {
  if (std::string message = first_error(result, ranks); !message.empty()) return message;
  std::string why = launched.message.empty() ? "the worker wrote no result" : launched.message;
  if (std::string tail = last_line(read_text(log)); !tail.empty())
    why += " (last output: " + tail + ")";
  return "[bench_cifar] " + why;
}

parallel::LaunchOptions launch_options(const BenchOptions& o, const BenchConfig& config,
                                       const fs::path& result, int log_fd) {
  const int ranks = config.mode == Mode::Distributed ? config.devices : 1;
  parallel::LaunchOptions launch;
  launch.nproc_per_node = ranks;
  launch.master_port = 0;
  launch.host_store = config.mode == Mode::Distributed;
  // --backend mpi: one mpirun, which starts the ranks (and meets them without a store).
  if (config.mode == Mode::Distributed && o.backend &&
      o.backend->start == parallel::RankStart::Mpirun) {
    launch.nproc_per_node = 1;
    launch.host_store = false;
    launch.command = {"mpirun", "--oversubscribe",    "--bind-to", "none",
                      "-np",    std::to_string(ranks)};
  }
  launch.command.push_back(fs::read_symlink("/proc/self/exe").string());
  for (std::string& arg : worker_arguments(o, config, result.string())) {
    launch.command.push_back(std::move(arg));
  }
  // The processes of a configuration share --threads between them, so
  // every row uses the same cores; dp splits its share over its replicas itself.
  launch.env["TANDEM_NUM_THREADS"] = std::to_string(std::max(1, total_threads(o) / ranks));
  launch.timeout = kConfigTimeout;
  launch.stdout_fd = log_fd;
  launch.stderr_fd = log_fd;
  return launch;
}

const BenchRow* find_row(const std::vector<BenchRow>& rows, const BenchConfig& wanted) {
  for (const BenchRow& row : rows) {
    if (row.config == wanted && row.measured) return &row;
  }
  return nullptr;
}

}  // namespace

WorkArea::WorkArea()
    : path_(fs::temp_directory_path() / ("bench_cifar_" + std::to_string(::getpid()))) {
  fs::remove_all(path_);
  fs::create_directories(path_);
}

WorkArea::~WorkArea() {
  std::error_code ignored;  // never throw from a destructor
  fs::remove_all(path_, ignored);
}

fs::path WorkArea::next(const std::string& extension) {
  return path_ / ("config" + std::to_string(count_++) + extension);
}

BenchRow run_config(const BenchOptions& options, const BenchConfig& config, WorkArea& area) {
  BenchRow row{.config = config};
  row.error = config_problem(config);
  if (!row.error.empty()) return row;
  const fs::path result = area.next(".json");
  const fs::path log = fs::path(result).replace_extension(".log");
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    row.error = "[bench_cifar] cannot create " + log.string();
    return row;
  }
  try {
    const parallel::LaunchResult launched =
        parallel::launch(launch_options(options, config, result, log_fd));
    ::close(log_fd);
    if (launched.exit_code == 0 && fs::exists(result)) {
      row.measured = measurement_from_json(nlohmann::json::parse(read_text(result)));
    } else {
      row.error =
          failure_of(launched, result, log, config.mode == Mode::Distributed ? config.devices : 1);
    }
  } catch (const std::exception& e) {
    ::close(log_fd);
    row.error = message_of(e);
  }
  return row;
}

std::vector<BenchRow> run_matrix(const BenchOptions& options, WorkArea& area,
                                 const RowCallback& on_row) {
  const std::vector<BenchConfig> configs = expand_matrix(options);
  std::vector<BenchRow> rows;
  rows.reserve(configs.size());
  for (const BenchConfig& config : configs) rows.push_back({.config = config});
  std::vector<std::vector<Measurement>> samples(configs.size());
  Progress progress{.runs = configs.size() * options.repeats, .repeats = options.repeats};
  BenchOptions unprofiled = options;  // --profile: the first repeat only
  unprofiled.profile_dir.clear();
  for (int repeat = 0; repeat < options.repeats; ++repeat) {
    progress.repeat = repeat;
    for (size_t i = 0; i < configs.size(); ++i, ++progress.run) {
      if (!rows[i].error.empty()) continue;  // failed before: it would fail again
      const BenchRow sample = run_config(repeat == 0 ? options : unprofiled, configs[i], area);
      if (sample.measured) {
        samples[i].push_back(*sample.measured);
      } else {
        // After a repeat that worked, say so: the cause is then the machine, not the flags.
        rows[i].error = sample.error;
        if (repeat > 0) {
          rows[i].error += " (repeat " + std::to_string(repeat + 1) + " of " +
                           std::to_string(options.repeats) + "; the earlier ones worked)";
        }
      }
      if (on_row) on_row(sample, progress);
    }
  }
  combine_repeats(rows, samples);
  add_scaling(rows);
  return rows;
}

void combine_repeats(std::vector<BenchRow>& rows,
                     const std::vector<std::vector<Measurement>>& samples) {
  TANDEM_CHECK(rows.size() == samples.size(), "[bench_cifar] ", samples.size(),
               " sample lists for ", rows.size(), " rows");
  for (size_t i = 0; i < rows.size(); ++i) {
    BenchRow& row = rows[i];
    row.measured.reset();
    row.images_per_s_samples.clear();
    if (!row.error.empty() || samples[i].empty()) continue;
    row.measured = median_measurement(samples[i]);
    for (const Measurement& m : samples[i]) row.images_per_s_samples.push_back(m.images_per_s);
  }
}

void add_scaling(std::vector<BenchRow>& rows) {
  for (BenchRow& row : rows) {
    if (!row.measured) continue;
    const BenchRow* base = find_row(rows, {.mode = Mode::Single,
                                           .devices = 1,
                                           .batch = row.config.batch,
                                           .precision = row.config.precision});
    if (!base) {
      BenchConfig same_mode = row.config;
      same_mode.devices = 1;
      base = find_row(rows, same_mode);
    }
    if (!base || base->measured->images_per_s <= 0) continue;
    row.measured->speedup = row.measured->images_per_s / base->measured->images_per_s;
    row.measured->efficiency = row.measured->speedup / row.config.devices;
  }
}

}  // namespace tandem::apps::bench
