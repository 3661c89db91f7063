#pragma once
/// The process-group backends, in one table: each row says which tensors a backend takes, how
/// its ranks are started and meet, and how its group is made. init_process_group reads it, and so
/// does every program's --backend; a backend is its folder (gloo/, nccl/, mpi/) and its row.
///
///   const BackendInfo& backend = find_backend("gloo");  // throws, naming the table's backends
///   if (backend.start == RankStart::Mpirun) ...          // no store: mpirun started the ranks
///
/// Note [Backend table]: code above the table asks a row what it needs to know (the device of
/// the tensors, whether a store is met, who starts the ranks) and never compares a backend's
/// name; the names are the table's, and so are the choices an error lists. The order of the rows
/// is the order of preference: default_backend() takes the first row for a device, as a PyTorch
/// script picks nccl on GPUs and gloo on CPUs.

#include <memory>
#include <span>
#include <string>

#include "engine/device.h"
#include "parallel/comm/process_group.h"
#include "parallel/comm/rendezvous/launch_env.h"
#include "parallel/comm/rendezvous/store.h"

namespace tandem::parallel {

/// Who starts a backend's ranks, and so how each learns where it sits.
enum class RankStart {
  Launcher,  ///< tandem-run, torchrun, srun, --nproc, or by hand (env://, tcp://, file://)
  Mpirun,    ///< mpirun, and MPI says where each rank sits
};

/// What a backend's factory is given.
struct BackendArgs {
  DistributedEnv env;            ///< where this rank sits
  std::shared_ptr<Store> store;  ///< the store the ranks met at; null where the backend meets none
  int device = -1;               ///< the GPU before_meeting bound, or -1
  ProcessGroupOptions options{};
};

struct BackendInfo {
  const char* name;         ///< as --backend and init_process_group() take it, e.g. "gloo"
  const char* description;  ///< what it is for, in the words of --help and errors
  DeviceType devices;       ///< of the group's tensors (tensor_device()); CUDA: a GPU per rank
  bool needs_store;         ///< the ranks meet at a rendezvous store (rendezvous.h) first
  RankStart start;          ///< who starts the ranks
  /// Whether this build has the backend (a build without it links a stub that says how to get
  /// it, when the group is made).
  bool (*available)();
  /// Where this rank sits, from what its starter left in the environment.
  DistributedEnv (*environment)();
  /// Runs before the ranks meet, so that a machine that cannot run the backend fails at once
  /// rather than after the others waited; returns the GPU it bound, or -1. Null: nothing to do.
  int (*before_meeting)(const DistributedEnv& env);
  /// Makes this rank's group.
  std::shared_ptr<ProcessGroup> (*make)(BackendArgs args);
};

/// Every backend, in the order of preference (Note [Backend table]).
std::span<const BackendInfo> backends();

/// The row named `name`, exactly as the table spells it. Throws "[process_group] unknown backend
/// 'ucc'; choose nccl (…), gloo (…) or mpi (…)".
const BackendInfo& find_backend(const std::string& name);

/// The table's names and descriptions as a sentence: "nccl (…), gloo (…) or mpi (…)".
std::string backend_choices();

/// The first backend whose tensors are on `devices`: nccl for CUDA, gloo for the CPU.
const BackendInfo& default_backend(DeviceType devices);

}  // namespace tandem::parallel
