#pragma once
/// train_cifar's flags: what they mean, their defaults and their checks. Kept apart from the
/// training loop so that tests can parse and validate command lines without training.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "apps/common/flags.h"
#include "apps/common/mode.h"
#include "apps/common/spellings.h"
#include "apps/common/training_setup.h"
#include "engine/memory_format.h"
#include "nn/precision.h"
#include "parallel/comm/backends.h"
#include "parallel/comm/rendezvous/init_method.h"
#include "parallel/comm/rendezvous/launch_env.h"
#include "parallel/comm_hook.h"
#include "parallel/reducer.h"

namespace CLI {
class App;
}

namespace tandem::apps {

/// The learning-rate schedule after the warm-up (--schedule).
enum class Schedule {
  MultiStep,  ///< "multistep": ÷10 at 50 % and 75 % of training (He et al.)
  Cosine,     ///< "cosine"
  OneCycle,   ///< "onecycle"
};
inline constexpr Spelling<Schedule> kScheduleSpellings[] = {{"multistep", Schedule::MultiStep},
                                                            {"cosine", Schedule::Cosine},
                                                            {"onecycle", Schedule::OneCycle}};
inline const char* schedule_name(Schedule schedule) {
  return name_in(kScheduleSpellings, schedule);
}

/// --resume: nothing, a checkpoint, or auto: --save's checkpoint when there is one, else a fresh
/// start (what a restarted worker needs).
struct ResumeFlag {
  bool automatic = false;  ///< --resume auto
  std::string path{};      ///< --resume PATH (empty for auto)
  bool given() const { return automatic || !path.empty(); }
};

/// train_cifar's setup before any flag: the library's defaults, with He et al.'s SGD (lr 0.1,
/// momentum 0.9, weight decay 1e-4). A function, not a designated default member initializer,
/// over which GCC 12 warns of a maybe-uninitialized string in every temporary TrainOptions{}.
SetupOptions default_train_setup();

struct TrainOptions {
  /// What make_training_setup builds, bound straight from the flags (Note [Options bound once]):
  /// --mode, --arch, --seed (which also seeds the data), --memory-format, SGD (--lr, --momentum,
  /// --weight-decay, --nesterov), DDP's buckets and overlap (--bucket-cap-mb, --first-bucket-mb,
  /// --no-overlap), --grad-compression, --sync-bn, --precision and --allow-slow-bf16.
  SetupOptions setup = default_train_setup();
  std::string devices;  ///< single: one; dp: a list; empty: choose_devices' default
  int nproc = 1;        ///< ddp outside a launcher: local workers to start
  /// ddp: how the ranks meet, env:// (a launcher's, or --nproc's), tcp://HOST:PORT or
  /// file:///PATH (parallel/comm/rendezvous/init_method.h)
  std::string init_method = "env://";
  int rank = -1;        ///< ddp, a rank started by hand: its rank; -1: a launcher's
  int world_size = -1;  ///< ddp, a rank started by hand: the job's ranks; -1: a launcher's
  /// ddp: a row of parallel::backends(); null: nccl on GPUs, else gloo (ddp_backend)
  const parallel::BackendInfo* backend = nullptr;
  int epochs = 10;           ///< the schedule's length
  int run_epochs = 0;        ///< epochs to run in this invocation (job chaining); 0: all left
  int64_t batch_size = 128;  ///< global: split over the devices (dp) or ranks (ddp)
  Schedule schedule = Schedule::MultiStep;
  double warmup_epochs = 0;
  int workers = 2;         ///< loader threads
  std::string data_dir;    ///< --data-dir; empty: the default places (Note [Default data folder])
  int64_t subset = 0;      ///< use the first N training (and N/5 test) images; 0: all
  bool synthetic = false;  ///< random images of CIFAR's shape instead of the data set
  /// check the data files' md5 sums (--no-verify-data: do not; Note [CIFAR-10 md5 check])
  bool verify_data = true;
  std::string save;              ///< checkpoint written after every epoch
  int64_t save_every_steps = 0;  ///< also every this many optimizer steps; 0: at epoch ends only
  ResumeFlag resume;             ///< checkpoint to continue from
  bool overwrite = false;  ///< a run without --resume may replace --save's checkpoint (Note [New
                           ///< run, old checkpoint])
  bool eval_only = false;  ///< evaluate (the --resume checkpoint) and stop
  int accumulate = 1;  ///< micro-batches of --batch-size per optimizer step (Note [Accumulation])
  double timeout_s = 300;  ///< ddp: a collective or the rendezvous failing after this long
  bool drop_last = false;  ///< drop a short last batch (ddp: and the images that do not divide)
  int threads = 0;         ///< CPU threads for kernels; 0: TANDEM_NUM_THREADS or all cores
  std::string log_json;    ///< JSON-lines metrics, one record per epoch and a summary
  bool progress = true;    ///< progress bar on a terminal (--no-progress: never)

  int64_t profile_steps = 0;            ///< steps to profile (Note [Profile window]); 0: none
  std::string profile_dir = "profile";  ///< where --profile writes its table and trace

  /// The command line as given (argv), for the "continue:" line (RunReport::print_next_steps).
  std::vector<std::string> command{};
};

/// Declares every flag on `app`, writing into `options`; --help explains each with its default.
void add_train_flags(CLI::App& app, TrainOptions& options);

/// Parses argv into options. Returns false after printing help (the caller exits 0); throws
/// tandem::Error ("[train_cifar] …", one line) for a bad flag or value.
bool parse_train_options(int argc, const char* const* argv, TrainOptions& options);

/// Checks values that CLI11 cannot: combinations and ranges, and outputs that are one file under
/// two flags (--log-json naming --save's sidecar). world_size: ranks of a ddp job.
void validate(const TrainOptions& options, int world_size);

/// Refuses a launch that cannot be what was meant, in one line, before anything starts: a
/// launcher's ranks (WORLD_SIZE > 1 from tandem-run or torchrun, mpirun's world) without
/// --mode ddp, which would each train the whole job alone and overwrite each other's
/// checkpoints; --nproc N > 1 without --mode ddp; and in ddp a half-set launcher environment
/// (RANK without WORLD_SIZE or the reverse). Slurm's variables are not judged: a batch script's
/// single process sees SLURM_NTASKS of the whole allocation too. Also a malformed --init-method,
/// tcp:// or file:// without --rank and --world-size, a rank out of range, and --nproc (or a
/// mode but ddp) with a rank started by hand.
void validate_launch(const TrainOptions& options, const parallel::EnvLookup& environment);

/// Whether this ddp process is a rank started by hand (--init-method tcp:// or file://, or
/// --rank and --world-size): it joins its job rather than starting --nproc ranks.
bool started_by_hand(const TrainOptions& options);

/// The rendezvous that --init-method, --rank and --world-size ask for.
parallel::InitOptions init_options(const TrainOptions& options);

/// Why the --nproc `ranks` NCCL ranks that train_cifar starts itself cannot each have a GPU when
/// `visible` are visible, in one line: "[ddp] 2 ranks on this node need 2 GPUs, 1 is visible; use
/// --backend gloo to run them on CPUs, or --nproc 1". Empty when they can. Checked before any
/// rank starts, so a one-GPU machine never reaches NCCL's "Duplicate GPU detected".
std::string local_ranks_gpu_problem(int ranks, int visible);

}  // namespace tandem::apps
