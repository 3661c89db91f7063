#include "parallel/comm/init_process_group.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/error.h"
#include "parallel/comm/gloo/gloo_process_group.h"
#include "parallel/comm/mpi/mpi_process_group.h"
#include "parallel/comm/nccl/nccl_process_group.h"
#include "parallel/comm/process_group.h"
#include "parallel/comm/rendezvous/rendezvous.h"
#include "parallel/comm/rendezvous/store.h"
#include "parallel/comm/socket.h"

namespace tandem::parallel {
namespace {

// Note [Gloo address]: which address Gloo binds, and advertises to the other ranks, when the
// options do not say. Explicit settings win: the options, then GLOO_SOCKET_IFNAME. When every
// rank is on this machine, loopback (it works in sandboxes without a resolvable host name).
// Otherwise the other machines must reach us: by this machine's host name, as PyTorch does, when
// it resolves to something other than loopback. Where it resolves to loopback only (containers,
// cloud images and laptops often map it to 127.0.1.1), or not at all, PyTorch advertises an
// address nobody else can reach and the rendezvous fails with "connection refused"; Tandem
// takes the local address of this rank's connection to the store instead, a connection to
// MASTER_ADDR that works, so the other machines can reach that address too (barring NAT).
void choose_gloo_address(const DistributedEnv& env, const Store& store,
                         ProcessGroupOptions& options) {
  if (!options.interface.empty() || !options.hostname.empty()) return;
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface && *interface) {
    options.interface = interface;
    return;
  }
  if (env.local_world_size == env.world_size) {
    options.hostname = "127.0.0.1";
    return;
  }
  char name[256] = {};
  const bool named = ::gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0';
  if (named && !net::resolves_to_loopback_only(name)) {
    options.hostname = name;
    return;
  }
  const std::string address = store.local_address();
  TANDEM_CHECK(!address.empty(), "[gloo] this machine's host name '", name,
               "' resolves to loopback only, and the store (", env.rendezvous_url,
               ") has no connection whose address could stand in; set GLOO_SOCKET_IFNAME to the "
               "network interface");
  options.hostname = address;
  if (env.local_rank == 0) {  // one line per machine
    std::fprintf(stderr,
                 "[gloo] rank %d: host name '%s' resolves to loopback only; using %s, this "
                 "machine's address towards the store at %s (set GLOO_SOCKET_IFNAME to choose)\n",
                 env.rank, name, address.c_str(), env.master_addr.c_str());
  }
}

// NCCL's bootstrap picks an interface by its own ranking (InfiniBand first, then any but
// loopback and docker*), which on a machine with several networks may not be one the other
// machines can reach. For a job across machines without NCCL_SOCKET_IFNAME (or NCCL_COMM_ID,
// where NCCL matches the subnet itself), Tandem names the interface that carries this rank's
// connection to the store, as for Gloo (Note [Gloo address]). NCCL reads the variable when the
// communicator is created, so it is set in the environment just before; "=" asks NCCL for
// that exact name rather than a prefix. InfiniBand traffic does not go through it.
void choose_nccl_interface(const DistributedEnv& env, const Store& store) {
  if (env.local_world_size == env.world_size || std::getenv("NCCL_SOCKET_IFNAME") != nullptr ||
      std::getenv("NCCL_COMM_ID") != nullptr) {
    return;
  }
  const std::string interface = net::interface_with_address(store.local_address());
  if (interface.empty()) return;  // leave the choice to NCCL
  ::setenv("NCCL_SOCKET_IFNAME", ("=" + interface).c_str(), 0);
  if (env.local_rank == 0) {
    std::fprintf(stderr,
                 "[nccl] rank %d: NCCL_SOCKET_IFNAME=%s (the interface towards the store "
                 "at %s; set NCCL_SOCKET_IFNAME to choose)\n",
                 env.rank, ("=" + interface).c_str(), env.master_addr.c_str());
  }
}

void check_backend(const std::string& backend) {
  TANDEM_CHECK(backend == "gloo" || backend == "nccl" || backend == "mpi",
               "[process_group] unknown backend '", backend,
               "'; choose gloo (CPU tensors), nccl (CUDA tensors) or mpi (under mpirun)");
}

// The backend's group on the store the ranks met at; `device`: the GPU already bound, or -1.
std::shared_ptr<ProcessGroup> make_group(const std::string& backend, Rendezvous met, int device,
                                         ProcessGroupOptions options) {
  const DistributedEnv& env = met.env;
  if (backend == "nccl") {
    if (device < 0) device = bind_nccl_device(env.rank, env.local_rank, env.local_world_size);
    choose_nccl_interface(env, *met.store);
    return make_nccl_process_group(met.store, env.rank, env.world_size, device, std::move(options));
  }
  choose_gloo_address(env, *met.store, options);
  return std::make_shared<GlooProcessGroup>(std::move(met.store), env.rank, env.world_size,
                                            std::move(options));
}

}  // namespace

std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend,
                                                 const DistributedEnv& env,
                                                 ProcessGroupOptions options) {
  check_backend(backend);
  // MPI's ranks know each other through mpirun: no store.
  if (backend == "mpi") return make_mpi_process_group(env, std::move(options));
  // One GPU per process (Note [NCCL device]), bound to this thread before the store is touched,
  // so a machine without one fails at once. Ranks started by hand learn their local rank from
  // the store (Note [Local ranks by hand]): before it they only check that there is a GPU.
  int device = -1;
  if (backend == "nccl" && env.local_ranks_known()) {
    device = bind_nccl_device(env.rank, env.local_rank, env.local_world_size);
  } else if (backend == "nccl") {
    check_nccl_device(env.rank, 0);
  }
  Rendezvous met = meet(env, options.timeout);
  return make_group(backend, std::move(met), device, std::move(options));
}

std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend, Rendezvous met,
                                                 ProcessGroupOptions options) {
  check_backend(backend);
  TANDEM_CHECK(backend != "mpi",
               "[process_group] mpi: the ranks come from mpirun, not from a store; use "
               "init_process_group(\"mpi\", mpi_environment())");
  return make_group(backend, std::move(met), -1, std::move(options));
}

std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend,
                                                 const InitOptions& init,
                                                 ProcessGroupOptions options) {
  return init_process_group(backend, rendezvous_env(init), std::move(options));
}

}  // namespace tandem::parallel
