#include "parallel/comm/backends.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/error.h"
#include "parallel/comm/gloo/gloo_process_group.h"
#include "parallel/comm/mpi/mpi_process_group.h"
#include "parallel/comm/nccl/nccl_process_group.h"
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

std::shared_ptr<ProcessGroup> make_gloo(BackendArgs args) {
  choose_gloo_address(args.env, *args.store, args.options);
  return std::make_shared<GlooProcessGroup>(std::move(args.store), args.env.rank,
                                            args.env.world_size, std::move(args.options));
}

// One GPU per process (Note [NCCL device]), bound to this thread before the store is touched, so
// a machine without one fails at once. Ranks started by hand learn their local rank from the
// store (Note [Local ranks by hand]): before it they only check that there is a GPU.
int nccl_before_meeting(const DistributedEnv& env) {
  if (env.local_ranks_known()) {
    return bind_nccl_device(env.rank, env.local_rank, env.local_world_size);
  }
  check_nccl_device(env.rank, 0);
  return -1;
}

std::shared_ptr<ProcessGroup> make_nccl(BackendArgs args) {
  const DistributedEnv& env = args.env;
  const int device = args.device >= 0
                         ? args.device
                         : bind_nccl_device(env.rank, env.local_rank, env.local_world_size);
  choose_nccl_interface(env, *args.store);
  return make_nccl_process_group(args.store, env.rank, env.world_size, device,
                                 std::move(args.options));
}

// MPI's ranks know each other through mpirun: no store.
std::shared_ptr<ProcessGroup> make_mpi(BackendArgs args) {
  return make_mpi_process_group(args.env, std::move(args.options));
}

bool always() {
  return true;
}

const BackendInfo kBackends[] = {
    {.name = "nccl",
     .description = "CUDA tensors, a GPU per rank",
     .devices = DeviceType::CUDA,
     .needs_store = true,
     .start = RankStart::Launcher,
     .available = nccl_available,
     .environment = from_environment,
     .before_meeting = nccl_before_meeting,
     .make = make_nccl},
    {.name = "gloo",
     .description = "CPU tensors",
     .devices = DeviceType::CPU,
     .needs_store = true,
     .start = RankStart::Launcher,
     .available = always,
     .environment = from_environment,
     .before_meeting = nullptr,
     .make = make_gloo},
    {.name = "mpi",
     .description = "CPU tensors, ranks started by mpirun",
     .devices = DeviceType::CPU,
     .needs_store = false,
     .start = RankStart::Mpirun,
     .available = mpi_available,
     .environment = mpi_environment,
     .before_meeting = nullptr,
     .make = make_mpi},
};

}  // namespace

std::span<const BackendInfo> backends() {
  return kBackends;
}

std::string backend_choices() {
  std::string text;
  const std::span<const BackendInfo> rows = backends();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) text += i + 1 == rows.size() ? " or " : ", ";
    text += std::string(rows[i].name) + " (" + rows[i].description + ")";
  }
  return text;
}

const BackendInfo& find_backend(const std::string& name) {
  for (const BackendInfo& backend : backends()) {
    if (name == backend.name) return backend;
  }
  TANDEM_FAIL("[process_group] unknown backend '", name, "'; choose ", backend_choices());
}

const BackendInfo& default_backend(DeviceType devices) {
  for (const BackendInfo& backend : backends()) {
    if (backend.devices == devices) return backend;
  }
  TANDEM_FAIL("[process_group] no backend takes ", devices == DeviceType::CUDA ? "CUDA" : "CPU",
              " tensors");
}

}  // namespace tandem::parallel
