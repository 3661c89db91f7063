// The MPI backend's entry points (mpi_process_group.h): the job as MPI sees it, and its world
// group.
#include "parallel/comm/mpi/mpi_process_group.h"

#include "engine/error.h"
#include "parallel/comm/mpi/mpi_engine.h"
#include "parallel/comm/mpi/mpi_group.h"

namespace tandem::parallel {
namespace {

// tandem-run and torchrun start processes that MPI sees as jobs of one each: say so, rather
// than train N separate copies.
void check_launcher(const DistributedEnv& env) {
  const EnvLookup lookup = process_environment();
  const std::optional<std::string> world = lookup("WORLD_SIZE");
  if (!world || lookup("OMPI_COMM_WORLD_SIZE")) return;
  TANDEM_CHECK(*world == std::to_string(env.world_size),
               "[mpi] a launcher started this process as ", "one of WORLD_SIZE=", *world,
               " (tandem-run or torchrun), but MPI sees a job of ", env.world_size,
               ": the mpi backend runs under mpirun, which starts the ranks itself "
               "(mpirun -np ",
               *world, " <program> ...)");
}

}  // namespace

bool mpi_available() {
  return true;
}

DistributedEnv mpi_environment() {
  const std::shared_ptr<MpiEngine> engine = MpiEngine::instance();
  DistributedEnv env;
  env.launcher = "mpirun";
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &env.rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &env.world_size), "MPI_Comm_size");
  MPI_Comm local = MPI_COMM_NULL;
  int split = MPI_SUCCESS;
  engine->watch("[mpi] rank " + std::to_string(env.rank) +
                    ": finding the ranks on this machine (MPI_Comm_split_type)",
                ProcessGroupOptions{}.timeout, [&] {
                  split = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, env.rank,
                                              MPI_INFO_NULL, &local);
                });
  check_mpi(split, "MPI_Comm_split_type");
  check_launcher(env);
  MPI_Comm_rank(local, &env.local_rank);
  MPI_Comm_size(local, &env.local_world_size);
  MPI_Comm_free(&local);
  return env;
}

std::shared_ptr<ProcessGroup> make_mpi_process_group(const DistributedEnv& env,
                                                     ProcessGroupOptions options) {
  std::shared_ptr<MpiEngine> engine = MpiEngine::instance();
  int rank = 0, size = 0;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  TANDEM_CHECK(rank == env.rank && size == env.world_size, "[mpi] MPI says this process is rank ",
               rank, " of ", size, ", but its launcher (", env.launcher, ") says rank ", env.rank,
               " of ", env.world_size,
               ": the mpi backend runs under mpirun, which starts the ranks itself (mpirun -np ",
               env.world_size, " <program> ...)");
  MPI_Comm comm = MPI_COMM_NULL;
  int duplicated = MPI_SUCCESS;
  engine->watch("[mpi] rank " + std::to_string(rank) + " of " + std::to_string(size) +
                    ": creating the group (MPI_Comm_dup of MPI_COMM_WORLD waits for every rank)",
                options.timeout, [&] { duplicated = MPI_Comm_dup(MPI_COMM_WORLD, &comm); });
  check_mpi(duplicated, "MPI_Comm_dup");
  return std::make_shared<MpiProcessGroup>(std::move(engine), comm, std::move(options));
}

}  // namespace tandem::parallel
