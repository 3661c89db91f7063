#pragma once
/// The init_method of init_process_group: how the ranks of a job find each other, spelt as in
/// torch.distributed.
///
///   env://           a launcher's variables (launch_env.h): tandem-run, torchrun, mpirun, srun
///   tcp://HOST:PORT  rank 0 hosts the store on PORT, at HOST (loopback for a loopback HOST: Note
///                    [Store address] in socket.h); the other ranks connect to HOST:PORT (an IPv6
///                    address in brackets: tcp://[fd00::1]:29500), proving TANDEM_JOB_TOKEN if set
///   file:///PATH     a file that every rank can reach, on a shared file system (file_store.h)
///
/// With tcp:// and file:// no launcher starts the ranks: each is started by hand, given its rank
/// and the world size, as in PyTorch's tutorials:
///
///   auto group = init_process_group(
///       "gloo", {.init_method = "tcp://10.1.1.20:23456", .rank = 1, .world_size = 3},
///       {.timeout = std::chrono::seconds(60)});

#include <memory>
#include <string>

#include "parallel/comm/process_group.h"
#include "parallel/comm/rendezvous/launch_env.h"

namespace tandem::parallel {

struct InitMethod {
  enum class Kind { Env, Tcp, File };
  Kind kind = Kind::Env;
  std::string url = "env://";  ///< as given, for messages
  std::string host{};          ///< tcp://: the store's host (an IPv6 address without brackets)
  int port = 0;                ///< tcp://: the store's port, 1..65535
  std::string path{};          ///< file://: the store's file, an absolute path
};

/// Parses an init method. Throws one line, "[init_method] 'URL' …", saying what is wrong and
/// what was expected: an unknown scheme, tcp:// without a host or a port, a port out of range,
/// file:// without an absolute path.
InitMethod parse_init_method(const std::string& url);

/// What init_process_group takes besides the backend and the options, as
/// torch.distributed.init_process_group(backend, init_method, rank=, world_size=) does.
struct InitOptions {
  std::string init_method = "env://";
  /// This process's rank and the job's size; -1: a launcher's (env:// only). tcp:// and file://
  /// need both. Under env:// they must agree with a launcher's variables, and without a launcher
  /// they stand in for RANK and WORLD_SIZE (MASTER_ADDR and MASTER_PORT are still read).
  int rank = -1;
  int world_size = -1;
};

/// Throws one line, "[init_method] …", for a rank and world size that `method` cannot take:
/// none (or one of the two) for tcp:// or file://, one without the other, a world size below 1,
/// a rank outside [0, world size).
void check_rank_and_world_size(const InitMethod& method, int rank, int world_size);

/// Where this process sits, for init_process_group(backend, env, …): env:// reads a launcher's
/// variables from `lookup` (launch_env.h); tcp:// and file:// take the rank and world size as
/// given and leave the local ranks to init_process_group (Note [Local ranks by hand]).
DistributedEnv rendezvous_env(const InitOptions& init,
                              const EnvLookup& lookup = process_environment());

}  // namespace tandem::parallel
