#include "tests/support/spawn_ranks.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "engine/error.h"
#include "parallel/launch/launcher.h"

namespace tandem::testing {
namespace {

std::string this_executable() {
  std::error_code error;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  TANDEM_CHECK(!error, "[spawn_ranks] cannot read /proc/self/exe: ", error.message());
  return path.string();
}

// The ranks' output goes to a file (the launcher writes with plain write() calls), removed when
// the spawn is over.
class OutputFile {
 public:
  OutputFile() {
    path_ = (std::filesystem::temp_directory_path() /
             ("tandem_ranks_" + std::to_string(::getpid()) + "_XXXXXX"))
                .string();
    fd_ = ::mkstemp(path_.data());
    TANDEM_CHECK(fd_ >= 0, "[spawn_ranks] cannot create ", path_);
    ::fcntl(fd_, F_SETFD, FD_CLOEXEC);
  }
  ~OutputFile() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  int fd() const { return fd_; }
  std::string read() const {
    std::ifstream in(path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace

bool SpawnResult::all_succeeded() const {
  if (timed_out || exit_codes.empty()) return false;
  for (int code : exit_codes) {
    if (code != 0) return false;
  }
  return true;
}

std::string SpawnResult::output_of(int rank) const {
  const std::string prefix = "[rank " + std::to_string(rank) + "] ";
  std::stringstream lines(output);
  std::string line, out;
  while (std::getline(lines, line)) {
    if (line.rfind(prefix, 0) == 0) out += line.substr(prefix.size()) + "\n";
  }
  return out;
}

SpawnResult spawn_ranks(int world_size, const std::string& gtest_filter,
                        const SpawnOptions& options) {
  parallel::LaunchOptions launch;
  launch.nproc_per_node = world_size;
  launch.master_port = 0;  // a free port, so tests may run in parallel
  launch.host_store = options.launcher_hosts_store;
  launch.command = {this_executable(), "--gtest_filter=" + gtest_filter, "--gtest_color=no"};
  launch.env = options.env;
  launch.env["TANDEM_SPAWNED_RANK"] = "1";
  // The parent's CTest/GoogleTest settings are not the ranks' business: an XML report would be
  // overwritten N times, and sharding could filter the test away.
  launch.unset_env = {"GTEST_OUTPUT", "GTEST_SHARD_INDEX", "GTEST_TOTAL_SHARDS",
                      "GTEST_SHARD_STATUS_FILE", "GTEST_FILTER"};
  launch.stop_on_failure = options.stop_on_failure;
  launch.kill_grace = std::chrono::seconds(2);
  launch.timeout = options.timeout;
  OutputFile output;
  launch.stdout_fd = output.fd();
  launch.stderr_fd = output.fd();

  const parallel::LaunchResult launched = parallel::launch(launch);
  SpawnResult result;
  for (const auto& worker : launched.workers) {
    result.exit_codes.push_back(worker.exit_code);
    result.signals.push_back(worker.signal);
  }
  result.timed_out = launched.timed_out;
  result.message = launched.message;
  result.output = output.read();
  std::cout << result.output << std::flush;
  return result;
}

SpawnResult spawn_ranks(int world_size, const std::string& gtest_filter,
                        std::chrono::seconds timeout, std::map<std::string, std::string> env) {
  return spawn_ranks(world_size, gtest_filter,
                     SpawnOptions{.timeout = timeout, .env = std::move(env)});
}

::testing::AssertionResult ranks_passed(const SpawnResult& result) {
  std::string problems;
  if (result.timed_out) problems += "the ranks timed out; ";
  for (size_t r = 0; r < result.exit_codes.size(); ++r) {
    if (result.exit_codes[r] != 0) {
      problems +=
          "rank " + std::to_string(r) +
          (result.signals[r] != 0 ? " was killed by signal " + std::to_string(result.signals[r])
                                  : " exited with " + std::to_string(result.exit_codes[r])) +
          "; ";
    } else if (result.output_of(static_cast<int>(r)).find("[       OK ] ") == std::string::npos) {
      problems += "rank " + std::to_string(r) + " passed no test (does the filter match?); ";
    }
  }
  if (result.exit_codes.empty()) problems += "no rank ran; ";
  if (problems.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << problems << result.message << "\n" << result.output;
}

bool launched_as_rank() {
  const char* value = std::getenv("TANDEM_SPAWNED_RANK");
  return value != nullptr && std::string(value) == "1";
}

std::string current_test_filter() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  TANDEM_CHECK(info != nullptr, "[spawn_ranks] current_test_filter() called outside a test");
  return std::string(info->test_suite_name()) + "." + info->name();
}

}  // namespace tandem::testing
