#pragma once
/// Where this process sits in a distributed job, read from the launcher's environment variables.
///
/// Three kinds of launcher are understood, first match wins:
///   tandem-run, torchrun  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
///                         MASTER_PORT, TORCHELASTIC_RESTART_COUNT (the attempt); torchrun
///                         also TORCHELASTIC_USE_AGENT_STORE
///   mpirun (Open MPI)     OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
///   srun (Slurm)          SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE
///                         (or SLURM_TASKS_PER_NODE with SLURM_NODEID)
/// mpirun and srun do not say where rank 0 is, so MASTER_ADDR and MASTER_PORT must be exported
/// for them too; the error says how.

#include <functional>
#include <map>
#include <optional>
#include <string>

namespace tandem::parallel {

/// Who runs the rendezvous store the ranks meet at.
enum class StoreHost {
  Rank0,          ///< mpirun, srun, variables set by hand: rank 0 hosts Tandem's store
  TandemRun,      ///< tandem-run hosts Tandem's store on node 0 (TANDEM_STORE_HOSTED=1)
  TorchrunAgent,  ///< torchrun's agent hosts PyTorch's TCPStore (TORCHELASTIC_USE_AGENT_STORE=True)
  File,           ///< file://: no server, a file every rank can reach (file_store.h)
};

struct DistributedEnv {
  int rank = 0;        ///< this process in [0, world_size)
  int world_size = 1;  ///< processes in the job
  /// This process among those on its machine (picks the GPU), and how many those are. -1 (both)
  /// for ranks started by hand (tcp://, file://): nobody says which share a machine, so
  /// init_process_group asks the store (Note [Local ranks by hand] in rendezvous.h).
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";  ///< host of the rendezvous store
  int master_port = 29500;                ///< port of the rendezvous store
  /// Who hosts the rendezvous store (Note [Who hosts the store] in rendezvous.cpp).
  StoreHost store_host = StoreHost::Rank0;
  /// Under a launcher-hosted store (tandem-run's or torchrun's agent's):
  /// TORCHELASTIC_RESTART_COUNT, the attempt, which scopes its keys (worker_store_prefix).
  int restart_count = 0;
  /// Which launcher's variables were read: "torchrun", "mpirun" or "srun"; "" for ranks started
  /// by hand (for messages).
  std::string launcher = "torchrun";
  /// How the ranks meet (init_method.h): "env://" here, else the URL ("tcp://node0:29500",
  /// "file:///mnt/nfs/job"), which messages name.
  std::string rendezvous_url = "env://";
  /// file://: the store's file (store_host File).
  std::string store_file{};

  bool local_ranks_known() const { return local_rank >= 0 && local_world_size >= 1; }
};

/// Looks a variable up; nothing when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

/// The process environment as an EnvLookup.
EnvLookup process_environment();

/// Reads the process environment. Throws a tandem::Error starting with "[env]" that names the
/// missing or malformed variable and how to set it.
DistributedEnv from_environment();
/// The same from any lookup (tests pass a map).
DistributedEnv from_environment(const EnvLookup& lookup);
DistributedEnv from_variables(const std::map<std::string, std::string>& variables);

/// Whether a launcher's variables are present (RANK and WORLD_SIZE, OMPI_COMM_WORLD_RANK or
/// SLURM_PROCID); from_environment() may still reject them.
bool launched_distributed();

bool launched_distributed(const EnvLookup& lookup);

/// What the launcher says about this process's GPUs (Note [NCCL device] in nccl_process_group.h).
struct LauncherGpus {
  /// CUDA_VISIBLE_DEVICES as set ("3", "0,1", "GPU-5e…"); nullopt when unset (every GPU visible).
  std::optional<std::string> visible_devices{};
  /// The GPUs Slurm gave the step on this machine: SLURM_STEP_GPUS, else SLURM_JOB_GPUS
  /// ("0,1,2,3"); nullopt outside Slurm or without GPUs.
  std::optional<std::string> slurm_gpus{};
};

/// Reads LauncherGpus from the process environment.
LauncherGpus launcher_gpus();
LauncherGpus launcher_gpus(const EnvLookup& lookup);

/// How many devices a comma-separated list such as CUDA_VISIBLE_DEVICES or SLURM_STEP_GPUS names
/// (empty entries do not count).
int listed_devices(const std::string& list);

/// For one of Slurm's task counts such as "2(x3),1": how many tasks run on node `node_id`.
int slurm_tasks_on_node(const std::string& tasks_per_node, int node_id);

/// The prefix of this attempt's keys in the rendezvous store: "/worker/attempt_N/" (N =
/// restart_count, as PyTorch's workers scope theirs) where a launcher hosts the store and keeps
/// the keys of earlier attempts (tandem-run --max-restarts, torchrun); "" where rank 0 hosts it
/// or it is a file (both die with the job).
std::string worker_store_prefix(const DistributedEnv& env);

/// CPU threads for one rank when nothing chose them (no TANDEM_NUM_THREADS, no --threads):
/// the machine's cores shared among the ranks on it, as tandem-run gives its workers; mpirun
/// and srun start every rank with all cores otherwise, and ranks sharing cores crawl.
int threads_per_local_rank(const DistributedEnv& env, int cores);

}  // namespace tandem::parallel
