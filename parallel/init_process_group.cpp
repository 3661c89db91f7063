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
  if (backend == "nccl") {
    return make_nccl_process_group(std::move(store), env.rank, env.world_size, env.local_rank,
                                   std::move(options));
  }
  choose_gloo_address(env, options);
  return std::make_shared<GlooProcessGroup>(std::move(store), env.rank, env.world_size,
                                            std::move(options));
}

}  // namespace tandem::parallel
