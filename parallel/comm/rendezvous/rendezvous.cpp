#include "parallel/comm/rendezvous/rendezvous.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/error.h"
#include "parallel/comm/rendezvous/file_store.h"
#include "parallel/comm/rendezvous/store_auth.h"
#include "parallel/comm/rendezvous/torch_store.h"

namespace tandem::parallel {
namespace {

// Note [Who hosts the store]: tandem-run hosts it on node 0 (like torchrun's agent store), so a
// port it checked stays reserved and the store outlives any worker; under mpirun or srun nobody
// else can, so rank 0 does, as it does for tcp:// (at the URL's port). Under torchrun's static
// rendezvous its agent hosts PyTorch's TCPStore: the ranks are clients of it (Note [TCPStore
// protocol] in torch_store.h). file:// has no host: rank 0 creates the file (Note [FileStore
// lifetime]). A store a launcher hosts keeps the keys of earlier attempts (tandem-run
// --max-restarts, torchrun --max-restarts), so each attempt's keys go under their own prefix, as
// PyTorch's workers do.
std::shared_ptr<Store> connect_store(const DistributedEnv& env, std::chrono::milliseconds timeout) {
  std::shared_ptr<Store> store;
  const bool by_hand = env.rendezvous_url != "env://";
  const std::string named_by = by_hand ? env.rendezvous_url : "MASTER_ADDR:MASTER_PORT";
  switch (env.store_host) {
    case StoreHost::TorchrunAgent:
      store = std::make_shared<TorchStore>(
          TcpStoreOptions{.host = env.master_addr, .port = env.master_port, .timeout = timeout});
      break;
    case StoreHost::File:
      store = std::make_shared<FileStore>(FileStoreOptions{.path = env.store_file,
                                                           .rank = env.rank,
                                                           .world_size = env.world_size,
                                                           .timeout = timeout});
      break;
    case StoreHost::Rank0:
    case StoreHost::TandemRun:
      store = std::make_shared<TcpStore>(
          TcpStoreOptions{.host = env.master_addr,
                          .port = env.master_port,
                          .is_server = env.rank == 0 && env.store_host == StoreHost::Rank0,
                          .token = auth::token_from_environment(),
                          .timeout = timeout,
                          .named_by = named_by});
      break;
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

// Set by a rank other than 0 once it has read rank 0's world size (Note [World size agreement]).
std::string world_size_read_key(int rank) {
  return "tandem/world_size_read/rank" + std::to_string(rank);
}

std::string machine_key(int rank) {
  return "tandem/machine/rank" + std::to_string(rank);
}

// Where the ranks meet, and what they must agree on to meet there, for the messages.
std::string meeting_place(const DistributedEnv& env) {
  if (env.store_host == StoreHost::File) return env.rendezvous_url;
  return env.master_addr + ":" + std::to_string(env.master_port);
}
std::string meeting_hint(const DistributedEnv& env) {
  if (env.rendezvous_url == "env://") return "the same MASTER_ADDR and MASTER_PORT";
  return "init method " + env.rendezvous_url + " and world size " + std::to_string(env.world_size);
}

// Note [Waiting for ranks]: a rank that never comes (not started, crashed while starting, given
// another MASTER_PORT) would leave the others silent for the whole --timeout, 300 s by default,
// and then name an internal store key. So the wait polls the store for each missing rank's
// `key`, says on stderr every min(10 s, timeout / 3) which ranks it still waits for, and ends in
// one line naming them. A Ctrl-C meanwhile is the program's to honour (train_cifar exits at once
// before training).
void wait_for_ranks(Store& store, const DistributedEnv& env, std::vector<int> missing,
                    const std::function<std::string(int rank)>& key,
                    std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto report_every =
      std::min<std::chrono::milliseconds>(std::chrono::seconds(10), timeout / 3);
  auto next_report = start + report_every;
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const std::string where = meeting_place(env);
  while (true) {
    std::erase_if(missing, [&](int rank) { return store.check({key(rank)}); });
    if (missing.empty()) return;
    const auto now = Clock::now();
    TANDEM_CHECK(now - start < timeout, "[process_group] rank ", env.rank, " of ", env.world_size,
                 ": ", rank_list(missing), " did not join within ", seconds(timeout),
                 " s (the timeout) at ", where, "; was every rank started, with ",
                 meeting_hint(env), "?");
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

// How long rank 0 waits, at most, for the others to read its world size before it leaves.
constexpr std::chrono::milliseconds kReadersWait{10000};

// Best effort: a rank that died never reads; the mismatch is reported either way.
void wait_for_readers(Store& store, const std::vector<int>& ranks,
                      std::chrono::milliseconds timeout) {
  std::vector<std::string> keys;
  keys.reserve(ranks.size());
  for (int rank : ranks) keys.push_back(world_size_read_key(rank));
  try {
    store.wait(keys, timeout);
  } catch (const Error&) {
    // Gone or late: rank 0's own line still says what is wrong.
  }
}

// Note [World size agreement]: a rank started with another world size (a wrong --nnodes or
// --nproc-per-node on one machine, a wrong --world-size by hand) would meet the others in Gloo's
// rendezvous with address lists of another length and fail on an internal assertion
// (`address.cc:45 sizeof(impl_) == bytes.size()`), or wait for ranks that never come. So every
// rank publishes the world size it was given and compares it with rank 0's, and rank 0 with every
// other rank's, before any backend meets.
void check_world_size(Store& store, const DistributedEnv& env, std::chrono::milliseconds timeout) {
  store.set(world_size_key(env.rank), to_bytes(std::to_string(env.world_size)));
  std::vector<int> others;
  if (env.rank != 0) {
    others.push_back(0);
  } else {
    for (int rank = 1; rank < env.world_size; ++rank) others.push_back(rank);
  }
  wait_for_ranks(store, env, others, world_size_key, timeout);
  const std::string advice = env.rendezvous_url == "env://"
                                 ? "every machine must be given the same --nnodes and "
                                   "--nproc-per-node"
                                 : "every rank must be given the same world size";
  std::vector<std::pair<int, int>> theirs;  // (rank, its world size)
  theirs.reserve(others.size());
  for (int rank : others) {
    theirs.emplace_back(rank,
                        std::atoi(to_string(store.get(world_size_key(rank), timeout)).c_str()));
  }
  if (env.rank != 0) store.set(world_size_read_key(env.rank), to_bytes("1"));
  for (const auto& [rank, size] : theirs) {
    if (size == env.world_size) continue;
    // Rank 0 hosts the store (by hand) or may: leaving at once would close it before the other
    // ranks have read its world size, and they would fail on a lost store instead of the cause.
    if (env.rank == 0) wait_for_readers(store, others, std::min(timeout, kReadersWait));
    TANDEM_FAIL("[process_group] rank ", env.rank, " was started for ", env.world_size,
                " ranks but rank ", rank, " for ", size, ": ", advice);
  }
}

// Note [Local ranks by hand].
void find_local_ranks(Store& store, DistributedEnv& env, std::chrono::milliseconds timeout) {
  const std::string mine = machine_identity();
  store.set(machine_key(env.rank), to_bytes(mine));
  std::vector<int> others;
  for (int rank = 0; rank < env.world_size; ++rank) {
    if (rank != env.rank) others.push_back(rank);
  }
  wait_for_ranks(store, env, others, machine_key, timeout);
  env.local_rank = 0;
  env.local_world_size = 1;
  for (int rank : others) {
    if (to_string(store.get(machine_key(rank), timeout)) != mine) continue;
    ++env.local_world_size;
    if (rank < env.rank) ++env.local_rank;
  }
}

}  // namespace

std::string machine_identity() {
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  struct stat network {};
  const bool namespaced = ::stat("/proc/self/ns/net", &network) == 0;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return boot_id + " net:" +
         (namespaced ? std::to_string(network.st_dev) + ":" + std::to_string(network.st_ino)
                     : std::string("?")) +
         " host:" + host;
}

Rendezvous meet(const DistributedEnv& env, std::chrono::milliseconds timeout) {
  Rendezvous met{.env = env, .store = connect_store(env, timeout)};
  check_world_size(*met.store, met.env, timeout);
  if (!met.env.local_ranks_known()) find_local_ranks(*met.store, met.env, timeout);
  return met;
}

}  // namespace tandem::parallel
