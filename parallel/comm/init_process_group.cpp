#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "engine/error.h"
#include "parallel/comm/gloo_process_group.h"
#include "parallel/comm/mpi_process_group.h"
#include "parallel/comm/nccl_process_group.h"
#include "parallel/comm/process_group.h"
#include "parallel/comm/socket.h"
#include "parallel/comm/store.h"
#include "parallel/comm/torch_store.h"

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
               "' resolves to loopback only, and the connection to the store has no address "
               "to use instead; set GLOO_SOCKET_IFNAME to the network interface");
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

// Note [Who hosts the store]: tandem-run hosts it on node 0 (like torchrun's agent store), so a
// port it checked stays reserved and the store outlives any worker; under mpirun or srun nobody
// else can, so rank 0 does. Under torchrun's static rendezvous its agent hosts PyTorch's
// TCPStore: the ranks are clients of it (Note [TCPStore protocol] in torch_store.h). A store a
// launcher hosts keeps the keys of earlier attempts (tandem-run --max-restarts, torchrun
// --max-restarts), so each attempt's keys go under their own prefix, as PyTorch's workers do.
std::shared_ptr<Store> connect_store(const DistributedEnv& env, std::chrono::milliseconds timeout) {
  std::shared_ptr<Store> store;
  if (env.store_host == StoreHost::TorchrunAgent) {
    store = std::make_shared<TorchStore>(
        TcpStoreOptions{.host = env.master_addr, .port = env.master_port, .timeout = timeout});
  } else {
    store = std::make_shared<TcpStore>(
        TcpStoreOptions{.host = env.master_addr,
                        .port = env.master_port,
                        .is_server = env.rank == 0 && env.store_host == StoreHost::Rank0,
                        .timeout = timeout});
  }
  const std::string prefix = worker_store_prefix(env);
  if (prefix.empty()) return store;
  return std::make_shared<PrefixStore>(prefix, std::move(store));
}

// "rank 1", "ranks 1, 2 and 3": the ranks a wait still misses, for its messages.
std::string rank_list(const std::vector<int>& ranks) {
  constexpr size_t kNamed = 8;
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size() && i < kNamed; ++i) {
    if (i > 0) text += (i + 1 == ranks.size()) ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  if (ranks.size() > kNamed) text += " and " + std::to_string(ranks.size() - kNamed) + " more";
  return text;
}

std::string world_size_key(int rank) {
  return "tandem/world_size/rank" + std::to_string(rank);
}

// Note [Waiting for ranks]: a rank that never comes (not started, crashed while starting, given
// another MASTER_PORT) would leave the others silent for the whole --timeout, 300 s by default,
// and then name an internal store key. So the wait polls the store, says on stderr every
// min(10 s, timeout / 3) which ranks it still waits for, and ends in one line naming them. A
// Ctrl-C meanwhile is the program's to honour (train_cifar exits at once before training).
void wait_for_ranks(Store& store, const DistributedEnv& env, std::vector<int> missing,
                    std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto report_every =
      std::min<std::chrono::milliseconds>(std::chrono::seconds(10), timeout / 3);
  auto next_report = start + report_every;
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const std::string where = env.master_addr + ":" + std::to_string(env.master_port);
  while (true) {
    std::erase_if(missing, [&](int rank) { return store.check({world_size_key(rank)}); });
    if (missing.empty()) return;
    const auto now = Clock::now();
    TANDEM_CHECK(now - start < timeout, "[process_group] rank ", env.rank, " of ", env.world_size,
                 ": ", rank_list(missing), " did not join within ", seconds(timeout),
                 " s (the timeout) at ", where,
                 "; was every rank started, with the same MASTER_ADDR and MASTER_PORT?");
    if (now >= next_report) {
      std::fprintf(
          stderr,
          "[process_group] rank %d of %d: waiting for %s to join at %s (%.0f s of %.0f s)\n",
          env.rank, env.world_size, rank_list(missing).c_str(), where.c_str(), seconds(now - start),
          seconds(timeout));
      next_report += report_every;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Note [World size agreement]: a rank started with another world size (a wrong --nnodes or
// --nproc-per-node on one machine) would meet the others in Gloo's rendezvous with address lists
// of another length and fail on an internal assertion (`address.cc:45 sizeof(impl_) ==
// bytes.size()`), or wait for ranks that never come. So every rank publishes the world size it
// was given and compares it with rank 0's, and rank 0 with every other rank's, before any backend
// meets.
void check_world_size(Store& store, const DistributedEnv& env, std::chrono::milliseconds timeout) {
  store.set(world_size_key(env.rank), to_bytes(std::to_string(env.world_size)));
  std::vector<int> others;
  if (env.rank != 0) {
    others.push_back(0);
  } else {
    for (int rank = 1; rank < env.world_size; ++rank) others.push_back(rank);
  }
  wait_for_ranks(store, env, others, timeout);
  for (int rank : others) {
    const int theirs = std::atoi(to_string(store.get(world_size_key(rank), timeout)).c_str());
    TANDEM_CHECK(theirs == env.world_size, "[process_group] rank ", env.rank, " was started for ",
                 env.world_size, " ranks but rank ", rank, " for ", theirs,
                 ": every machine must be given the same --nnodes and --nproc-per-node");
  }
}

}  // namespace

std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend,
                                                 const DistributedEnv& env,
                                                 ProcessGroupOptions options) {
  TANDEM_CHECK(backend == "gloo" || backend == "nccl" || backend == "mpi",
               "[process_group] unknown backend '", backend,
               "'; choose gloo (CPU tensors), nccl (CUDA tensors) or mpi (under mpirun)");
  // MPI's ranks know each other through mpirun: no store.
  if (backend == "mpi") return make_mpi_process_group(env, std::move(options));
  // One GPU per process (Note [NCCL device]), bound to this thread before the store is touched,
  // so a machine without one fails at once.
  const int device =
      backend == "nccl" ? bind_nccl_device(env.rank, env.local_rank, env.local_world_size) : -1;
  auto store = connect_store(env, options.timeout);
  check_world_size(*store, env, options.timeout);
  if (backend == "nccl") {
    choose_nccl_interface(env, *store);
    return make_nccl_process_group(store, env.rank, env.world_size, device, std::move(options));
  }
  choose_gloo_address(env, *store, options);
  return std::make_shared<GlooProcessGroup>(std::move(store), env.rank, env.world_size,
                                            std::move(options));
}

}  // namespace tandem::parallel
