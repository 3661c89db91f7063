#pragma once
/// The MPI backend (`init_process_group("mpi", ...)`, `train_cifar --backend mpi`), as
/// torch.distributed's MPI backend is known: the job is started by mpirun, and every rank's
/// rank and world size come from MPI itself (MPI_COMM_WORLD), with no rendezvous store.
///
///   mpirun -np 2 ./build/apps/train_cifar --mode ddp --backend mpi --epochs 1
///
///   auto group = init_process_group("mpi", mpi_environment());   // in a program
///
/// Built when CMake finds MPI (Open MPI: apt-get install libopenmpi-dev openmpi-bin; the
/// configure summary shows ✓ MPI); in a build without it every function here throws one line
/// saying how to get it. This header names no MPI type; the group is mpi_group.h, its progress
/// thread and MPI's lifetime mpi_engine.h (Notes [MPI progress], [MPI lanes], [MPI timeouts],
/// [MPI lifetime]), the dtype rules mpi_datatypes.h (Note [MPI reductions]).
///
/// Tensors: CPU tensors, and CUDA tensors only where MPI is CUDA-aware (asked of Open MPI with
/// MPIX_Query_cuda_support() when MPI starts; otherwise a CUDA tensor is refused in one line
/// naming that check). The group's tensor_device() is the CPU, so DDP over MPI trains on CPUs.

#include <memory>

#include "parallel/comm/process_group.h"
#include "parallel/comm/rendezvous/launch_env.h"

namespace tandem::parallel {

/// Whether this build has the MPI backend.
bool mpi_available();

/// Where this process sits in the MPI job: rank and world size of MPI_COMM_WORLD, local rank
/// and size among the ranks sharing this machine (MPI_Comm_split_type), launcher "mpirun".
/// Starts MPI (Note [MPI lifetime]); every rank must call it, as it is collective.
DistributedEnv mpi_environment();

/// The group of every rank of the MPI job (a duplicate of MPI_COMM_WORLD: the program's own MPI
/// traffic never meets it). `env` must agree with MPI (it does when it comes from
/// mpi_environment() or from mpirun's variables); a rank started another way (tandem-run,
/// torchrun) is an MPI job of one process, and is refused in one line saying to use mpirun.
std::shared_ptr<ProcessGroup> make_mpi_process_group(const DistributedEnv& env,
                                                     ProcessGroupOptions options = {});

}  // namespace tandem::parallel
