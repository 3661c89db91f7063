#include "tests/support/mpirun_ranks.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "engine/error.h"
#include "parallel/comm/mpi/mpi_process_group.h"

namespace tandem::testing {
namespace {

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream folders(path != nullptr ? path : "");
  std::string folder;
  while (std::getline(folders, folder, ':')) {
    if (!folder.empty() && ::access((folder + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

// mpirun --tag-output writes "[1,2]<stdout>:text" for rank 2; spawn_ranks() writes
// "[rank 2] text", which SpawnResult::output_of() and ranks_passed() read.
std::string retag(const std::string& output) {
  std::stringstream lines(output);
  std::string line, out;
  while (std::getline(lines, line)) {
    const size_t comma = line.find(',');
    const size_t close = line.find("]<");
    const size_t colon = line.find(">:");
    if (line.rfind("[", 0) == 0 && comma != std::string::npos && close != std::string::npos &&
        colon != std::string::npos && comma < close && close < colon) {
      out += "[rank " + line.substr(comma + 1, close - comma - 1) + "] " + line.substr(colon + 2);
    } else {
      out += line;
    }
    out += '\n';
  }
  return out;
}

std::vector<std::string> mpirun_command(int world_size, const std::string& gtest_filter,
                                        const MpirunOptions& options) {
  std::vector<std::string> command = {
      "mpirun", "--allow-run-as-root",     "--oversubscribe", "--bind-to", "none", "--tag-output",
      "-np",    std::to_string(world_size)};
  if (options.command.empty()) {
    command.push_back(std::filesystem::read_symlink("/proc/self/exe").string());
    command.push_back("--gtest_filter=" + gtest_filter);
    command.push_back("--gtest_color=no");
  } else {
    command.insert(command.end(), options.command.begin(), options.command.end());
  }
  return command;
}

// The child: its own process group (so a timeout kills mpirun and its ranks together), output to
// `fd`, the ranks' environment.
[[noreturn]] void exec_mpirun(const std::vector<std::string>& command, const MpirunOptions& options,
                              int fd) {
  ::setpgid(0, 0);
  ::dup2(fd, STDOUT_FILENO);
  ::dup2(fd, STDERR_FILENO);
  // The parent's CTest/GoogleTest settings are not the ranks' business (as in spawn_ranks), and
  // a launcher's variables would make the ranks take mpirun for another launcher.
  for (const char* name :
       {"GTEST_OUTPUT", "GTEST_SHARD_INDEX", "GTEST_TOTAL_SHARDS", "GTEST_SHARD_STATUS_FILE",
        "GTEST_FILTER", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}) {
    ::unsetenv(name);
  }
  export_mpirun_environment();
  ::setenv("TANDEM_SPAWNED_RANK", "1", 1);
  ::setenv("TANDEM_NUM_THREADS", "1", 0);
  for (const auto& [name, value] : options.env) ::setenv(name.c_str(), value.c_str(), 1);
  std::vector<char*> argv;
  for (const std::string& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "[mpirun_ranks] cannot run mpirun\n");
  ::_exit(127);
}

}  // namespace

void export_mpirun_environment() {
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
#if defined(__SANITIZE_ADDRESS__)
  const char* asan = std::getenv("ASAN_OPTIONS");
  std::string options = asan != nullptr ? asan : "";
  if (options.find("fast_unwind_on_malloc") == std::string::npos) {
    ::setenv("ASAN_OPTIONS",
             (options + (options.empty() ? "" : ":") + "fast_unwind_on_malloc=0").c_str(), 1);
  }
#endif
}

std::string mpirun_unavailable_reason() {
  if (!parallel::mpi_available()) {
    return "this build has no MPI backend (configure with Open MPI installed: "
           "scripts/install_deps.sh)";
  }
  if (!on_path("mpirun")) return "mpirun is not on PATH (apt-get install openmpi-bin)";
  return "";
}

SpawnResult mpirun_ranks(int world_size, const std::string& gtest_filter,
                         const MpirunOptions& options) {
  const std::vector<std::string> command = mpirun_command(world_size, gtest_filter, options);
  std::string path = (std::filesystem::temp_directory_path() /
                      ("tandem_mpirun_" + std::to_string(::getpid()) + "_XXXXXX"))
                         .string();
  const int fd = ::mkstemp(path.data());
  TANDEM_CHECK(fd >= 0, "[mpirun_ranks] cannot create ", path);
  const pid_t pid = ::fork();
  TANDEM_CHECK(pid >= 0, "[mpirun_ranks] fork failed");
  if (pid == 0) exec_mpirun(command, options, fd);
  ::close(fd);

  SpawnResult result;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline && !result.timed_out) {
      result.timed_out = true;
      ::kill(-pid, SIGTERM);
      std::this_thread::sleep_for(std::chrono::seconds(2));
      ::kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.exit_codes.assign(static_cast<size_t>(world_size), code);
  result.signals.assign(static_cast<size_t>(world_size),
                        WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  if (code != 0) result.message = "mpirun exited with " + std::to_string(code);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(path.c_str());
  result.output = retag(text.str());
  std::cout << result.output << std::flush;
  return result;
}

}  // namespace tandem::testing
