#include "parallel/comm/rendezvous/launch_env.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <vector>

#include "engine/error.h"

namespace tandem::parallel {
namespace {

std::optional<int> to_int(const std::string& text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return {};
  return value;
}

int read_int(const EnvLookup& lookup, const std::string& name) {
  const auto text = lookup(name);
  TANDEM_CHECK(text.has_value(), "[env] ", name, " is not set");
  const auto value = to_int(*text);
  TANDEM_CHECK(value.has_value(), "[env] ", name, "='", *text, "' is not an integer");
  return *value;
}

int read_int_or(const EnvLookup& lookup, const std::string& name, int fallback) {
  return lookup(name) ? read_int(lookup, name) : fallback;
}

// mpirun and srun do not tell the ranks where rank 0 is: say how to.
std::string rendezvous_hint(const std::string& launcher) {
  if (launcher == "mpirun") {
    return "mpirun does not set it: export MASTER_ADDR=<host of rank 0> MASTER_PORT=<free port> "
           "and pass both with `mpirun -x MASTER_ADDR -x MASTER_PORT ...`";
  }
  if (launcher == "srun") {
    return "srun does not set it: in the batch script, export MASTER_ADDR=$(scontrol show "
           "hostnames \"$SLURM_JOB_NODELIST\" | head -n 1) and MASTER_PORT=29500 before srun";
  }
  return "export MASTER_ADDR=<host of rank 0> and MASTER_PORT=<free port>, or start the job "
         "with tandem-run";
}

void read_rendezvous(const EnvLookup& lookup, DistributedEnv& env) {
  const auto addr = lookup("MASTER_ADDR");
  TANDEM_CHECK(addr && !addr->empty(), "[env] MASTER_ADDR is not set (launched by ", env.launcher,
               "); ", rendezvous_hint(env.launcher));
  env.master_addr = *addr;
  TANDEM_CHECK(lookup("MASTER_PORT").has_value(), "[env] MASTER_PORT is not set (launched by ",
               env.launcher, "); ", rendezvous_hint(env.launcher));
  env.master_port = read_int(lookup, "MASTER_PORT");
  if (lookup("TANDEM_STORE_HOSTED").value_or("0") == "1") env.store_host = StoreHost::TandemRun;
  // PyTorch writes Python's str(True); anything else (or nothing) means rank 0 hosts the store.
  if (lookup("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True") {
    env.store_host = StoreHost::TorchrunAgent;
  }
  // Both launchers' stores outlive an attempt, so each attempt's keys need their own prefix
  // (worker_store_prefix); a store rank 0 hosts dies with the attempt.
  if (env.store_host != StoreHost::Rank0) {
    env.restart_count = read_int_or(lookup, "TORCHELASTIC_RESTART_COUNT", 0);
  }
}

void validate(const DistributedEnv& env, const std::string& rank_name, const std::string& size_name,
              const std::string& local_rank_name, const std::string& local_size_name) {
  TANDEM_CHECK(env.world_size >= 1, "[env] ", size_name, "=", env.world_size,
               " must be at least 1");
  TANDEM_CHECK(env.rank >= 0 && env.rank < env.world_size, "[env] ", rank_name, "=", env.rank,
               " is out of range for ", size_name, "=", env.world_size, " (ranks are 0..",
               env.world_size - 1, ")");
  TANDEM_CHECK(env.local_world_size >= 1 && env.local_world_size <= env.world_size, "[env] ",
               local_size_name, "=", env.local_world_size, " must be in 1..", size_name, " (",
               env.world_size, ")");
  TANDEM_CHECK(env.local_rank >= 0 && env.local_rank < env.local_world_size, "[env] ",
               local_rank_name, "=", env.local_rank, " is out of range for ", local_size_name, "=",
               env.local_world_size);
  TANDEM_CHECK(env.master_port >= 0 && env.master_port <= 65535,
               "[env] MASTER_PORT=", env.master_port, " is out of range 1..65535");
  TANDEM_CHECK(env.master_port != 0 || env.world_size == 1, "[env] MASTER_PORT=0 cannot work with ",
               env.world_size,
               " processes: every rank must know the same port (tandem-run --master-port 0 "
               "picks one for them)");
}

DistributedEnv read_torchrun(const EnvLookup& lookup) {
  DistributedEnv env;
  env.launcher = "torchrun";
  env.rank = read_int(lookup, "RANK");
  env.world_size = read_int(lookup, "WORLD_SIZE");
  // Set by hand (RANK=1 WORLD_SIZE=2 ./train), the local variables may be missing: one machine.
  env.local_rank = read_int_or(lookup, "LOCAL_RANK", env.rank);
  env.local_world_size = read_int_or(lookup, "LOCAL_WORLD_SIZE", env.world_size);
  read_rendezvous(lookup, env);
  validate(env, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  return env;
}

DistributedEnv read_open_mpi(const EnvLookup& lookup) {
  DistributedEnv env;
  env.launcher = "mpirun";
  env.rank = read_int(lookup, "OMPI_COMM_WORLD_RANK");
  env.world_size = read_int(lookup, "OMPI_COMM_WORLD_SIZE");
  env.local_rank = read_int(lookup, "OMPI_COMM_WORLD_LOCAL_RANK");
  env.local_world_size = read_int(lookup, "OMPI_COMM_WORLD_LOCAL_SIZE");
  read_rendezvous(lookup, env);
  validate(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
           "OMPI_COMM_WORLD_LOCAL_SIZE");
  return env;
}

DistributedEnv read_slurm(const EnvLookup& lookup) {
  DistributedEnv env;
  env.launcher = "srun";
  env.rank = read_int(lookup, "SLURM_PROCID");
  env.world_size = read_int(lookup, lookup("SLURM_NTASKS") ? "SLURM_NTASKS" : "SLURM_NPROCS");
  env.local_rank = read_int(lookup, "SLURM_LOCALID");
  std::string local_size_name = "SLURM_NTASKS_PER_NODE";
  if (lookup("SLURM_NTASKS_PER_NODE")) {
    env.local_world_size = read_int(lookup, "SLURM_NTASKS_PER_NODE");
  } else {
    local_size_name = "SLURM_TASKS_PER_NODE";
    const auto tasks = lookup("SLURM_TASKS_PER_NODE");
    TANDEM_CHECK(tasks.has_value(),
                 "[env] neither SLURM_NTASKS_PER_NODE nor SLURM_TASKS_PER_NODE is set; run the "
                 "job step with srun (it sets them)");
    env.local_world_size = slurm_tasks_on_node(*tasks, read_int_or(lookup, "SLURM_NODEID", 0));
  }
  read_rendezvous(lookup, env);
  validate(env, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", local_size_name);
  return env;
}

}  // namespace

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

DistributedEnv from_environment(const EnvLookup& lookup) {
  if (lookup("RANK") || lookup("WORLD_SIZE")) return read_torchrun(lookup);
  if (lookup("OMPI_COMM_WORLD_RANK")) return read_open_mpi(lookup);
  if (lookup("SLURM_PROCID")) return read_slurm(lookup);
  TANDEM_FAIL(
      "[env] not started by a launcher: none of RANK/WORLD_SIZE (tandem-run, torchrun), "
      "OMPI_COMM_WORLD_RANK (mpirun) or SLURM_PROCID (srun) is set; start the job with "
      "`tandem-run --nproc-per-node N -- <command>`");
}

DistributedEnv from_environment() {
  return from_environment(process_environment());
}

DistributedEnv from_variables(const std::map<std::string, std::string>& variables) {
  return from_environment([&](const std::string& name) -> std::optional<std::string> {
    const auto it = variables.find(name);
    if (it == variables.end()) return std::nullopt;
    return it->second;
  });
}

bool launched_distributed(const EnvLookup& lookup) {
  return (lookup("RANK") && lookup("WORLD_SIZE")) || lookup("OMPI_COMM_WORLD_RANK") ||
         lookup("SLURM_PROCID");
}

bool launched_distributed() {
  return launched_distributed(process_environment());
}

LauncherGpus launcher_gpus(const EnvLookup& lookup) {
  return {.visible_devices = lookup("CUDA_VISIBLE_DEVICES"),
          .slurm_gpus =
              lookup("SLURM_STEP_GPUS") ? lookup("SLURM_STEP_GPUS") : lookup("SLURM_JOB_GPUS")};
}

LauncherGpus launcher_gpus() {
  return launcher_gpus(process_environment());
}

int listed_devices(const std::string& list) {
  int count = 0;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    if (comma > start) ++count;
    start = comma + 1;
  }
  return count;
}

int slurm_tasks_on_node(const std::string& tasks_per_node, int node_id) {
  // "2(x3),1" means two tasks on each of three nodes, then one task on the fourth.
  std::vector<int> counts;
  size_t start = 0;
  while (start <= tasks_per_node.size()) {
    const size_t comma = std::min(tasks_per_node.find(',', start), tasks_per_node.size());
    const std::string entry = tasks_per_node.substr(start, comma - start);
    const size_t paren = entry.find("(x");
    const auto tasks = to_int(entry.substr(0, paren));
    std::optional<int> repeat = 1;
    if (paren != std::string::npos) {
      const bool closed = entry.size() > paren + 2 && entry.back() == ')';
      repeat = closed ? to_int(entry.substr(paren + 2, entry.size() - paren - 3)) : std::nullopt;
    }
    TANDEM_CHECK(tasks && repeat && *tasks >= 1 && *repeat >= 1 && *repeat <= 1000000,
                 "[env] SLURM_TASKS_PER_NODE='", tasks_per_node,
                 "' is malformed (expected e.g. '4' or '2(x3),1')");
    counts.insert(counts.end(), static_cast<size_t>(*repeat), *tasks);
    start = comma + 1;
  }
  TANDEM_CHECK(node_id >= 0 && node_id < static_cast<int>(counts.size()),
               "[env] SLURM_NODEID=", node_id, " is out of range for SLURM_TASKS_PER_NODE='",
               tasks_per_node, "' (", counts.size(), " nodes)");
  return counts[static_cast<size_t>(node_id)];
}

std::string worker_store_prefix(const DistributedEnv& env) {
  if (env.store_host == StoreHost::Rank0 || env.store_host == StoreHost::File) return "";
  return "/worker/attempt_" + std::to_string(env.restart_count) + "/";
}

int threads_per_local_rank(const DistributedEnv& env, int cores) {
  return std::max(1, cores / std::max(1, env.local_world_size));
}

}  // namespace tandem::parallel
