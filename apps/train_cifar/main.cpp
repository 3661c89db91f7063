// train_cifar: trains a CIFAR ResNet on one device (--mode single), with DataParallel (--mode dp)
// or with DistributedDataParallel (--mode ddp). See README.md and `train_cifar --help`.
//
// In ddp mode outside a launcher, this process starts --nproc copies of itself through
// tandem-run's logic and waits for them; under tandem-run, torchrun, mpirun or srun, or started
// by hand with --init-method tcp:// or file:// and its --rank, it is one rank of the job.
// --backend mpi runs under mpirun only (or alone, as a job of one).

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "apps/common/run_main.h"
#include "apps/common/training_setup.h"
#include "apps/train_cifar/train_options.h"
#include "apps/train_cifar/trainer.h"
#include "engine/device_runtime.h"
#include "engine/error.h"
#include "engine/threads.h"
#include "parallel/comm/backends.h"
#include "parallel/comm/init_process_group.h"
#include "parallel/comm/rendezvous/init_method.h"
#include "parallel/comm/rendezvous/launch_env.h"
#include "parallel/comm/rendezvous/rendezvous.h"
#include "parallel/launch/launcher.h"

namespace {

using namespace tandem;

// The signal that stopped the run: it exits 128 + that signal, as a process killed by it would
// (130 for Ctrl-C, 143 for SIGTERM), in every mode, as tandem-run's workers do.
volatile std::sig_atomic_t stopping_signal = SIGINT;

void on_signal(int sig) {
  if (!apps::training_started().load()) {
    // Only async-signal-safe calls here: write and _exit.
    constexpr char kMessage[] = "train_cifar: interrupted before training began; nothing to save\n";
    [[maybe_unused]] const ssize_t ignored = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
    ::_exit(128 + sig);
  }
  stopping_signal = sig;
  apps::stop_requested() = true;
  std::signal(sig, SIG_DFL);  // a second Ctrl-C (or SIGTERM) stops at once
}

// ddp on one machine without a launcher: the same command line, once per rank. Ranks of a
// backend of CUDA tensors (NCCL) that the GPUs cannot hold one each stop here, in one line,
// before any rank starts.
int launch_local_ranks(const apps::TrainOptions& options, int argc, char** argv) {
  apps::validate(options, options.nproc);  // here once, rather than once by every rank
  if (apps::ddp_backend(options.backend).devices == DeviceType::CUDA) {
    const int visible = cuda_available() ? cuda_runtime().device_count() : 0;
    const std::string problem = apps::local_ranks_gpu_problem(options.nproc, visible);
    TANDEM_CHECK(problem.empty(), problem);
  }
  parallel::LaunchOptions launch;
  launch.nproc_per_node = options.nproc;
  launch.master_port = 0;
  launch.command.push_back(std::filesystem::read_symlink("/proc/self/exe").string());
  for (int i = 1; i < argc; ++i) launch.command.emplace_back(argv[i]);
  return parallel::launch(launch).exit_code;
}

// --backend mpi: mpirun starts the ranks, and MPI says where this one sits (no store). Outside
// mpirun this process is an MPI job of one; more ranks need mpirun. A build without the backend
// says so first, when it reads the environment.
parallel::DistributedEnv mpirun_job(const apps::TrainOptions& options,
                                    const parallel::BackendInfo& backend) {
  TANDEM_CHECK(options.nproc == 1 || parallel::launched_distributed() || !backend.available(),
               "[train_cifar] --backend ", backend.name,
               ": mpirun starts the ranks, not --nproc: mpirun -np ", options.nproc,
               " train_cifar --mode ddp --backend ", backend.name, " ...");
  return backend.environment();
}

// A ddp rank joins its job: a launcher's (env://) or, started by hand, the one at
// --init-method; under --backend mpi, mpirun's. The ranks on its machine share the cores unless
// --threads or TANDEM_NUM_THREADS says otherwise (tandem-run says so itself; mpirun, srun and
// ranks started by hand do not); `local_ranks` receives how many they are. Ranks started by hand
// learn that from the store (Note [Local ranks by hand]), so they meet before the group is built.
std::shared_ptr<parallel::ProcessGroup> join_job(const apps::TrainOptions& options,
                                                 int& local_ranks) {
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000));
  const parallel::BackendInfo& backend = apps::ddp_backend(options.backend);
  const auto share_cores = [&](const parallel::DistributedEnv& found) {
    local_ranks = found.local_world_size;
    if (options.threads == 0 && std::getenv("TANDEM_NUM_THREADS") == nullptr) {
      const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      set_num_threads(parallel::threads_per_local_rank(found, cores));
    }
  };
  if (backend.start == parallel::RankStart::Mpirun) {
    const parallel::DistributedEnv env = mpirun_job(options, backend);
    share_cores(env);
    return parallel::init_process_group(backend.name, env, {.timeout = timeout});
  }
  const parallel::DistributedEnv env = parallel::rendezvous_env(apps::init_options(options));
  if (env.local_ranks_known()) {
    share_cores(env);
    return parallel::init_process_group(backend.name, env, {.timeout = timeout});
  }
  // Before the others wait (NCCL: a GPU is there); with the local ranks unknown it binds none.
  if (backend.before_meeting) backend.before_meeting(env);
  parallel::Rendezvous met = parallel::meet(env, timeout);
  share_cores(met.env);
  return parallel::init_process_group(backend.name, std::move(met), {.timeout = timeout});
}

int run(int argc, char** argv) {
  apps::TrainOptions options;
  if (!apps::parse_train_options(argc, argv, options)) return 0;
  apps::validate_launch(options, parallel::process_environment());
  std::shared_ptr<parallel::ProcessGroup> group;
  int local_ranks = 1;
  if (options.setup.mode == apps::Mode::Distributed) {
    const bool mpirun = apps::ddp_backend(options.backend).start == parallel::RankStart::Mpirun;
    if (!mpirun && !apps::started_by_hand(options) && !parallel::launched_distributed()) {
      return launch_local_ranks(options, argc, argv);
    }
    group = join_job(options, local_ranks);
  }
  apps::Trainer trainer(options, group, local_ranks);
  const apps::RunSummary summary = trainer.run();
  return summary.interrupted ? 128 + static_cast<int>(stopping_signal) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  return apps::run_main("train_cifar", [&] { return run(argc, argv); });
}
