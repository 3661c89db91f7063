#pragma once
/// The meeting before init_process_group builds a backend's group: the store of the job's init
/// method connected, hosted or created, every rank's world size checked against the others', and
/// for ranks started by hand, which of them share a machine. init_process_group(backend, env)
/// does both halves; a program that needs what the meeting found before the group exists
/// (train_cifar shares a machine's cores among its ranks) calls them one by one:
///
///   Rendezvous met = meet(rendezvous_env(init), timeout);   // init_method.h
///   set_num_threads(threads_per_local_rank(met.env, cores));
///   auto group = init_process_group("gloo", std::move(met), {.timeout = timeout});
///
/// Note [Local ranks by hand]: ranks started by hand (tcp://, file://) are not told which of them
/// share a machine, yet a rank's GPU (cuda:local_rank, Note [NCCL device]) and Gloo's address
/// (loopback when every rank is on this machine, Note [Gloo address]) depend on it. So each rank
/// sets in the store where it runs, its machine, and counts the ranks before it that run there
/// too. A machine is the kernel's boot id, the network namespace and the host name: processes
/// that share all three share loopback and GPUs. Two network namespaces of one kernel (the netns
/// tests' two "hosts") are two machines, as loopback does not cross them.

#include <chrono>
#include <memory>

#include "parallel/comm/process_group.h"
#include "parallel/comm/rendezvous/launch_env.h"
#include "parallel/comm/rendezvous/store.h"

namespace tandem::parallel {

struct Rendezvous {
  /// The env given, with its local ranks found where it had none (Note [Local ranks by hand]).
  DistributedEnv env;
  /// The store every rank met at, scoped to this attempt (worker_store_prefix).
  std::shared_ptr<Store> store;
};

/// Connects to (or hosts, or creates) env's store, checks that every rank was given the same
/// world size (Note [World size agreement]) and finds the local ranks when env has none. Throws
/// one line naming the ranks that did not come within `timeout`.
Rendezvous meet(const DistributedEnv& env, std::chrono::milliseconds timeout);

/// What identifies this machine among the ranks (Note [Local ranks by hand]).
std::string machine_identity();

}  // namespace tandem::parallel
