#pragma once
/// init_process_group: the group of this process from its launch environment, for any backend
/// of the table (backends.h), which says whether the ranks meet at a store and makes the group.
///
///   auto group = init_process_group("gloo", from_environment());

#include <memory>
#include <string>

#include "parallel/comm/process_group.h"
#include "parallel/comm/rendezvous/init_method.h"
#include "parallel/comm/rendezvous/launch_env.h"
#include "parallel/comm/rendezvous/rendezvous.h"

namespace tandem::parallel {

/// Creates the group of this process from `env` (see rendezvous/launch_env.h): connects to the
/// rendezvous store at env.master_addr:master_port (hosting it on rank 0 unless the launcher does;
/// a file under file://, rendezvous.h), then builds the backend's group. backend: a name of the
/// table (backends.h): "gloo" (CPU tensors) or "nccl" (CUDA tensors on cuda:<env.local_rank>; in a
/// build without CUDA an error that says so), or "mpi" (ranks started by mpirun, which need no
/// store: make_mpi_process_group() in mpi_process_group.h); another name is an error listing the
/// table's. The returned group keeps the store (and, on rank 0, the server) alive.
/// The form of torch.distributed, with an init method (env://, tcp://, file://), is in
/// init_method.h.
std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend,
                                                 const DistributedEnv& env,
                                                 ProcessGroupOptions options = {});

/// Builds the backend's group on the store the ranks met at, as init_process_group(backend,
/// env, options) does after its meeting. On NCCL it binds the GPU only now (Note [NCCL device]),
/// so a machine without one is found after the meeting rather than before.
std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend, Rendezvous met,
                                                 ProcessGroupOptions options = {});

/// init_process_group(backend, rendezvous_env(init), options): the form of torch.distributed.
std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend,
                                                 const InitOptions& init,
                                                 ProcessGroupOptions options = {});

}  // namespace tandem::parallel
