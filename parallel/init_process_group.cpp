#include <unistd.h>

#include <cstdlib>

#include "engine/error.h"
#include "parallel/gloo_process_group.h"
#include "parallel/nccl_process_group.h"
#include "parallel/process_group.h"
#include "parallel/store.h"

namespace tandem::parallel {
namespace {

// Which address Gloo binds when the options do not say: loopback is right (and works in
// sandboxes without a resolvable hostname) when every rank is on this machine; otherwise the
// other machines must reach us by this machine's hostname, as PyTorch does by default.
void choose_gloo_address(const DistributedEnv& env, ProcessGroupOptions& options) {
  if (!options.interface.empty() || !options.hostname.empty()) return;
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface && *interface) {
    options.interface = interface;
  } else if (env.local_world_size == env.world_size) {
    options.hostname = "127.0.0.1";
  } else {
    char name[256] = {};
    TANDEM_CHECK(::gethostname(name, sizeof(name) - 1) == 0,
                 "[gloo] gethostname failed; set GLOO_SOCKET_IFNAME to the network interface");
    options.hostname = name;
  }
}

// Note [World size agreement]: a rank started with another world size (a wrong --nnodes or
// --nproc-per-node on one machine) would meet the others in Gloo's rendezvous with address lists
// of another length and fail on an internal assertion (`address.cc:45 sizeof(impl_) ==
// bytes.size()`), or wait for ranks that never come. So every rank publishes the world size it
// was given and compares it with rank 0's, and rank 0 with every other rank's, before any backend
// meets.
void check_world_size(Store& store, const DistributedEnv& env, std::chrono::milliseconds timeout) {
  const auto key = [](int rank) { return "tandem/world_size/rank" + std::to_string(rank); };
  store.set(key(env.rank), to_bytes(std::to_string(env.world_size)));
  const auto world_size_of = [&](int rank) {
    const std::string text = to_string(store.get(key(rank), timeout));
    return std::atoi(text.c_str());
  };
  const auto check = [&](int rank, int theirs) {
    TANDEM_CHECK(theirs == env.world_size, "[process_group] rank ", env.rank, " was started for ",
                 env.world_size, " ranks but rank ", rank, " for ", theirs,
                 ": every machine must be given the same --nnodes and --nproc-per-node");
  };
  if (env.rank != 0) return check(0, world_size_of(0));
  for (int rank = 1; rank < env.world_size; ++rank) check(rank, world_size_of(rank));
}

}  // namespace

std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend,
                                                 const DistributedEnv& env,
                                                 ProcessGroupOptions options) {
  TANDEM_CHECK(backend == "gloo" || backend == "nccl", "[process_group] unknown backend '", backend,
               "'; choose gloo (CPU tensors) or nccl (CUDA tensors)");
  // One GPU per process: the local rank picks it, as with torchrun (cuda:LOCAL_RANK). Checked
  // before the store, so a machine without one fails at once.
  if (backend == "nccl") check_nccl_device(env.rank, env.local_rank);
  // Note [Who hosts the store]: tandem-run hosts it on node 0 (like torchrun's agent store), so
  // a port it checked stays reserved and the store outlives any worker; under mpirun or srun
  // nobody else can, so rank 0 does.
  TcpStoreOptions store_options{.host = env.master_addr,
                                .port = env.master_port,
                                .is_server = env.rank == 0 && !env.store_hosted_by_launcher,
                                .timeout = options.timeout};
  auto store = std::make_shared<TcpStore>(store_options);
  check_world_size(*store, env, options.timeout);
  if (backend == "nccl") {
    return make_nccl_process_group(std::move(store), env.rank, env.world_size, env.local_rank,
                                   std::move(options));
  }
  choose_gloo_address(env, options);
  return std::make_shared<GlooProcessGroup>(std::move(store), env.rank, env.world_size,
                                            std::move(options));
}

}  // namespace tandem::parallel
