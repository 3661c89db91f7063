#include "apps/train_cifar/train_options.h"

#include <CLI/CLI.hpp>

#include "apps/common/choice_flag.h"
#include "apps/common/flag_errors.h"
#include "apps/common/flags.h"
#include "apps/common/output_lock.h"
#include "apps/common/output_paths.h"
#include "apps/common/parse_command_line.h"
#include "apps/common/wording.h"
#include "engine/error.h"
#include "nn/checkpoint.h"
#include "parallel/comm/nccl/nccl_process_group.h"

namespace tandem::apps {

namespace {

// What trains where: mode, model, devices, ranks.
void add_launch_flags(CLI::App& app, TrainOptions& o) {
  add_mode_flag(app, o.setup.mode);
  add_arch_flag(app, o.setup.arch);
  app.add_option(
      "--devices", o.devices,
      "single: one device; dp: a list such as cuda:0,cuda:1 or cpu:0,cpu:1 (repeats allowed); "
      "default: cuda:0, else the CPU (single), every GPU, else cpu:0,cpu:1 (dp)");
  app.add_option("--nproc", o.nproc,
                 "ddp: local worker processes to start (ignored under a launcher, whose job this "
                 "process joins)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  add_backend_flag(
      app, o.backend,
      "ddp: " + parallel::backend_choices() + "; default: nccl when there are GPUs, else gloo");
  app.add_option("--init-method", o.init_method,
                 "ddp: how the ranks meet: env:// (a launcher's variables, or --nproc), "
                 "tcp://HOST:PORT (rank 0 hosts the store at that port) or file:///PATH (a file "
                 "every rank can reach); with tcp:// and file:// start each rank by hand with "
                 "--rank and --world-size")
      ->capture_default_str();
  app.add_option("--rank", o.rank, "ddp, a rank started by hand: its rank, 0..--world-size - 1")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--world-size", o.world_size, "ddp, a rank started by hand: the job's ranks")
      ->check(CLI::Range(1, 1 << 20));
}

// The optimisation: length, batch, SGD and the learning-rate schedule.
void add_schedule_flags(CLI::App& app, TrainOptions& o) {
  app.add_option("--epochs", o.epochs, "training epochs")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--run-epochs", o.run_epochs,
                 "stop after this many epochs of this invocation and --resume later (job chaining "
                 "under a time limit); 0: run to --epochs")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_option("--batch-size", o.batch_size,
                 "global batch, split over devices (dp) or ranks (ddp)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--lr", o.setup.sgd.lr, "peak learning rate")
      ->check(positive_number())
      ->capture_default_str();
  app.add_option("--momentum", o.setup.sgd.momentum, "SGD momentum")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_flag("--nesterov", o.setup.sgd.nesterov, "Nesterov momentum");
  app.add_option("--weight-decay", o.setup.sgd.weight_decay, "L2 weight decay")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  add_choice_flag(app, "--schedule", o.schedule, kScheduleSpellings,
                  "multistep (÷10 at 50% and 75% of training, He et al.), cosine or onecycle");
  app.add_option("--warmup-epochs", o.warmup_epochs, "linear warm-up from lr/10")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
}

// The data: loader threads, where from, how much, the seed.
void add_data_flags(CLI::App& app, TrainOptions& o) {
  app.add_option("--workers", o.workers, "data loader threads (0: on the training thread)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  add_data_dir_flag(app, o.data_dir);
  add_no_verify_data_flag(app, o.verify_data);
  app.add_option("--subset", o.subset,
                 "train on the first N images and test on the first N/5; 0: all")
      ->check(CLI::Range(int64_t{0}, int64_t{50000}))
      ->capture_default_str();
  app.add_flag("--synthetic", o.synthetic, "random CIFAR-shaped data instead of --data-dir");
  app.add_option("--seed", o.setup.seed, "seed of the weights, the shuffling and the augmentation")
      ->check(non_negative_number())
      ->capture_default_str();
}

// Checkpoints: saving, resuming, evaluating.
void add_checkpoint_flags(CLI::App& app, TrainOptions& o) {
  app.add_option("--save", o.save, "checkpoint written after every epoch (PATH and PATH.state)");
  app.add_option("--save-every-steps", o.save_every_steps,
                 "also save every this many optimizer steps, in the middle of an epoch (a resume "
                 "redoes at most these); 0: at the end of each epoch only")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_option_function<std::string>(
      "--resume",
      [&o](const std::string& path) {
        o.resume = path == "auto" ? ResumeFlag{.automatic = true} : ResumeFlag{.path = path};
      },
      "continue from this checkpoint; auto: from --save's when it is there, else start afresh "
      "(what a restarted worker needs: tandem-run/torchrun --max-restarts); a checkpoint there "
      "that cannot be loaded is refused, never started over");
  app.add_flag("--overwrite", o.overwrite,
               "start afresh over the checkpoint at --save and the log at --log-json (without it, "
               "a run without --resume refuses to replace either)")
      // A job script passes --resume auto on every restart: were --overwrite beside it to mean
      // "start afresh", each restart would throw the run away (Note [Resume auto never starts
      // over] in run_position.cpp), so the two are refused together.
      ->excludes("--resume");
  app.add_flag("--eval-only", o.eval_only,
               "evaluate the --resume checkpoint on the test set and stop");
}

// DDP and the kernels: buckets, timeouts, accumulation, compression, threads, formats.
void add_parallel_flags(CLI::App& app, TrainOptions& o) {
  add_bucket_flags(app, o.setup.ddp.reducer);
  app.add_option("--timeout", o.timeout_s,
                 "ddp: seconds before a collective or the rendezvous gives up (a dead or stopped "
                 "rank is reported then)")
      ->check(CLI::Range(0.1, 1e9))
      ->capture_default_str();
  app.add_option("--accumulate", o.accumulate,
                 "micro-batches of --batch-size per optimizer step (gradient accumulation; ddp "
                 "all-reduces once per step, under no_sync before)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_flag("--sync-bn", o.setup.sync_bn,
               "ddp: batch-norm statistics over every rank's images (SyncBatchNorm), so N ranks "
               "normalise as one process of the global batch");
  add_grad_compression_flag(app, o.setup.grad_compression);
  add_zero_flag(app, o.setup.ddp.sharding);
  app.add_flag("--drop-last", o.drop_last,
               "drop each epoch's short last batch; in ddp also the images that do not divide over "
               "the ranks (otherwise ranks with fewer batches join, Note [Join protocol])");
  app.add_flag_callback(
      "--no-overlap", [&o] { o.setup.ddp.reducer.overlap = false; },
      "ddp: all-reduce only after backward (to measure the overlap)");
  add_threads_flag(app, o.threads, "");
  add_memory_format_flag(app, o.setup.memory_format);
  add_precision_flags(app, o.setup.precision, o.setup.allow_slow_bf16);
}

// What it writes and shows.
void add_output_flags(CLI::App& app, TrainOptions& o) {
  app.add_option("--log-json", o.log_json,
                 "JSON-lines metrics: one record per epoch and a summary");
  // A callback rather than CLI11's "!--no-progress", whose help reads "--no-progress{false}".
  app.add_flag_callback(
      "--no-progress", [&o] { o.progress = false; }, "plain lines instead of a progress bar");
  app.add_option("--profile", o.profile_steps,
                 "profile this many training steps after the first 2 (torch.profiler's "
                 "schedule(wait=2, active=STEPS)): print a per-op table and write it with a "
                 "Chrome trace (Perfetto, chrome://tracing) to --profile-dir, one per rank")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--profile-dir", o.profile_dir,
                 "folder of --profile's files: train_cifar.rank<R>.ops.md (the table) and "
                 "train_cifar.rank<R>.trace.json")
      ->capture_default_str();
}

// The files a run writes, each with the words that tell the user which flag it comes from.
std::vector<OutputFile> run_outputs(const TrainOptions& o) {
  std::vector<OutputFile> outputs;
  if (!o.save.empty()) {
    const std::string previous = nn::previous_path(o.save);
    outputs = {{o.save, "--save"},
               {nn::sidecar_path(o.save), "--save's sidecar"},
               {previous, "--save's previous checkpoint"},
               {nn::sidecar_path(previous), "--save's previous sidecar"},
               {OutputLock::lock_path(o.save), "--save's lock file"}};
  }
  if (!o.log_json.empty()) {
    outputs.push_back({o.log_json, "--log-json"});
    outputs.push_back({OutputLock::lock_path(o.log_json), "--log-json's lock file"});
  }
  return outputs;
}

}  // namespace

SetupOptions default_train_setup() {
  SetupOptions setup;
  setup.sgd = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f};
  return setup;
}

// In --help's order.
void add_train_flags(CLI::App& app, TrainOptions& o) {
  add_launch_flags(app, o);
  add_schedule_flags(app, o);
  add_data_flags(app, o);
  add_checkpoint_flags(app, o);
  add_parallel_flags(app, o);
  add_output_flags(app, o);
}

bool parse_train_options(int argc, const char* const* argv, TrainOptions& options) {
  CLI::App app(
      "train_cifar: trains a ResNet on CIFAR-10 on one device, with DataParallel or with "
      "DistributedDataParallel",
      "train_cifar");
  // A flag given twice takes its last value, as Python's argparse does: a wrapper script's
  // defaults (scripts/train.sh's --data-dir) and the user's own flags after them then combine.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  add_train_flags(app, options);
  options.command.assign(argv, argv + argc);
  return parse_command_line(app, argc, argv, "train_cifar");
}

void validate(const TrainOptions& o, int world_size) {
  TANDEM_CHECK(!o.eval_only || o.resume.given(),
               "[train_cifar] --eval-only needs a checkpoint to evaluate: add --resume PATH");
  TANDEM_CHECK(
      o.run_epochs == 0 || !o.save.empty(),
      "[train_cifar] --run-epochs stops early to continue later, which needs a checkpoint: "
      "add --save PATH");
  TANDEM_CHECK(o.save_every_steps == 0 || !o.save.empty(),
               "[train_cifar] --save-every-steps needs --save PATH to write to");
  TANDEM_CHECK(!o.resume.automatic || !o.save.empty(),
               "[train_cifar] --resume auto resumes from --save's checkpoint: add --save PATH");
  TANDEM_CHECK(
      o.setup.mode == Mode::Distributed ||
          (!o.backend && o.setup.ddp.reducer.overlap && !o.setup.sync_bn &&
           o.setup.grad_compression == parallel::GradCompression::None &&
           o.setup.ddp.sharding == parallel::Sharding::None),
      "[train_cifar] --backend, --no-overlap, --sync-bn, --grad-compression and --zero are for "
      "--mode ddp");
  if (o.setup.mode == Mode::Distributed) {
    const int64_t below = o.batch_size - o.batch_size % world_size;
    // A resumed run keeps its global batch (Note [A resume knows its run]): other world sizes.
    int fewer = world_size - 1, more = world_size + 1;
    while (fewer > 1 && o.batch_size % fewer != 0) --fewer;
    while (more < o.batch_size && o.batch_size % more != 0) ++more;
    TANDEM_CHECK(o.batch_size % world_size == 0, "[train_cifar] --batch-size ", o.batch_size,
                 " does not split evenly over ", world_size, " ranks; use ",
                 below > 0 ? std::to_string(below) + " or " : "", below + world_size,
                 ", or keep it (as a resumed run must) on ", fewer,
                 more <= o.batch_size ? " or " + std::to_string(more) : "", " ranks");
  }
  TANDEM_CHECK(o.subset == 0 || o.subset >= world_size, "[train_cifar] --subset ", o.subset,
               " leaves fewer training images than the ", world_size, " ranks");
  check_distinct_outputs("train_cifar", run_outputs(o));
}

bool started_by_hand(const TrainOptions& o) {
  return parallel::parse_init_method(o.init_method).kind != parallel::InitMethod::Kind::Env ||
         o.rank >= 0 || o.world_size >= 0;
}

parallel::InitOptions init_options(const TrainOptions& o) {
  return {.init_method = o.init_method, .rank = o.rank, .world_size = o.world_size};
}

void validate_launch(const TrainOptions& o, const parallel::EnvLookup& environment) {
  TANDEM_CHECK(o.setup.mode == Mode::Distributed || o.nproc == 1, "[train_cifar] --nproc ", o.nproc,
               " starts ddp ranks, but the mode is ", mode_name(o.setup.mode),
               ": add --mode ddp (or drop --nproc)");
  const bool by_hand = started_by_hand(o);  // throws for a malformed --init-method
  TANDEM_CHECK(o.setup.mode == Mode::Distributed || !by_hand, "[train_cifar] --init-method ",
               o.init_method, ", --rank and --world-size start ddp ranks, but the mode is ",
               mode_name(o.setup.mode), ": add --mode ddp");
  parallel::check_rank_and_world_size(parallel::parse_init_method(o.init_method), o.rank,
                                      o.world_size);
  TANDEM_CHECK(!by_hand || o.backend == nullptr || o.backend->start != parallel::RankStart::Mpirun,
               "[train_cifar] --backend ", o.backend ? o.backend->name : "",
               ": mpirun starts the ranks and says where each sits; drop --init-method, --rank "
               "and --world-size (or use --backend gloo)");
  TANDEM_CHECK(!by_hand || o.nproc == 1, "[train_cifar] --nproc ", o.nproc,
               " starts ranks on this machine through env://, but a rank started by hand (",
               o.init_method, ", --rank) is one process: start each rank with its own --rank");
  if (by_hand) return;  // a launcher's variables do not matter to it
  const auto rank = environment("RANK"), world = environment("WORLD_SIZE");
  const auto mpi_world = environment("OMPI_COMM_WORLD_SIZE");
  const std::string launched_world = world ? *world : mpi_world.value_or("1");
  TANDEM_CHECK(o.setup.mode == Mode::Distributed || launched_world == "1" || launched_world == "0",
               "[train_cifar] a launcher started this process as one of ", launched_world,
               world ? " (WORLD_SIZE)" : " (mpirun)", ", but --mode ", mode_name(o.setup.mode),
               " trains the whole job in each, which would overwrite each other's checkpoints: "
               "add --mode ddp, or start one process without the launcher");
  if (o.setup.mode != Mode::Distributed || rank.has_value() == world.has_value()) return;
  TANDEM_FAIL("[train_cifar] ", rank ? "RANK" : "WORLD_SIZE", " is set but ",
              rank ? "WORLD_SIZE" : "RANK",
              " is not: a launcher sets both; unset it to start --nproc ranks here");
}

std::string local_ranks_gpu_problem(int ranks, int visible) {
  // The ranks inherit this process's environment: a CUDA_VISIBLE_DEVICES of one device is one GPU
  // for all of them, not one each, so no launcher evidence applies (Note [NCCL device]).
  const int needed = parallel::nccl_gpus_needed(ranks, visible, parallel::LauncherGpus{});
  if (visible >= needed) return "";
  std::string problem = detail::concat("[ddp] ", counted(ranks, "rank"), " on this node need",
                                       ranks == 1 ? "s " : " ", counted(needed, "GPU"), ", ",
                                       visible, visible == 1 ? " is" : " are",
                                       " visible; use --backend gloo to run them on CPUs");
  if (visible > 0) problem += ", or --nproc " + std::to_string(visible);
  return problem;
}

}  // namespace tandem::apps
