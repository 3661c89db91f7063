#include "apps/train_cifar/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "apps/common/data_dir.h"
#include "apps/train_cifar/pending_steps.h"
#include "apps/train_cifar/progress.h"
#include "data/cifar10.h"
#include "engine/elapsed.h"
#include "engine/tandem.h"
#include "nn/flop_count.h"
#include "nn/resnet.h"
#include "parallel/comm_hook.h"
#include "parallel/data_parallel.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/join.h"
#include "parallel/sgd_joinable.h"
#include "parallel/sync_batch_norm.h"

namespace tandem::apps {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kEvalBatch = 500;

}  // namespace

std::atomic<bool>& stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}

std::atomic<bool>& training_started() {
  static std::atomic<bool> flag{false};
  return flag;
}

Trainer::Trainer(const TrainOptions& options, std::shared_ptr<parallel::ProcessGroup> group,
                 int local_ranks)
    : Trainer(options, std::move(group), local_ranks, resume_source(options)) {}

Trainer::Trainer(const TrainOptions& options, std::shared_ptr<parallel::ProcessGroup> group,
                 int local_ranks, std::string resume_path)
    : options_(options),
      group_(std::move(group)),
      rank_(group_ ? group_->rank() : 0),
      world_(group_ ? group_->size() : 1),
      local_ranks_(std::max(1, local_ranks)),
      report_(options, world_, /*enabled=*/rank_ == 0, /*append_log=*/!resume_path.empty()),
      keeper_(options, group_, report_, std::move(resume_path)) {
  validate(options_, world_);
  if (options_.threads > 0) set_num_threads(options_.threads);
  setup_ = make_training_setup(
      options_.setup, choose_devices(options_.setup.mode, options_.devices, group_.get()), group_,
      [this](nn::Module& network, nn::Sgd& optimizer) { keeper_.resume(network, optimizer); });
  keeper_.restore_buckets(setup_);
  const RunPosition& start = keeper_.start();
  step_ = start.step;
  TANDEM_CHECK(options_.batch_size >= static_cast<int64_t>(setup_.devices.size()),
               "[train_cifar] --batch-size ", options_.batch_size, " is smaller than the ",
               setup_.devices.size(), " devices it is split over");
  TANDEM_CHECK(options_.eval_only || start.epoch < options_.epochs || options_.resume.automatic,
               "[train_cifar] nothing to train: ", options_.resume.path, " finished epoch ",
               start.epoch, " and --epochs is ", options_.epochs,
               "; raise --epochs to train on, or use --eval-only to evaluate it");
  keeper_.check_outputs(*setup_.network);
  profile_.emplace(profile_options());
  build_data();
  build_schedule();
  keeper_.check_ranks_resume_alike();
}

Trainer::~Trainer() = default;

void Trainer::build_data() {
  read_data_sets();
  const std::shared_ptr<const data::Sampler> train_sampler = make_train_sampler();
  const auto test_sampler =
      std::make_shared<data::StridedSampler>(test_set_->size(), world_, rank_);
  train_loader_ = std::make_unique<data::DataLoader>(
      std::make_shared<data::CifarImages>(train_set_), train_sampler,
      data::DataLoaderConfig{.batch_size = shares_.local_batch,
                             .workers = options_.workers,
                             .drop_last = options_.drop_last,
                             .seed = options_.setup.seed,
                             .device = setup_.device(),
                             .memory_format = setup_.memory_format});
  test_loader_ = std::make_unique<data::DataLoader>(
      std::make_shared<data::CifarImages>(test_set_, data::eval_transform()), test_sampler,
      data::DataLoaderConfig{.batch_size = kEvalBatch,
                             .workers = options_.workers,
                             .device = setup_.device(),
                             .memory_format = setup_.memory_format});
}

void Trainer::read_data_sets() {
  const int64_t test_limit = options_.subset > 0 ? std::max<int64_t>(1, options_.subset / 5) : 0;
  if (options_.synthetic) {
    train_set_ = std::make_shared<data::CifarDataset>(data::synthetic_cifar10(
        options_.subset > 0 ? options_.subset : 50000, options_.setup.seed));
    test_set_ = std::make_shared<data::CifarDataset>(
        data::synthetic_cifar10(test_limit > 0 ? test_limit : 10000, options_.setup.seed + 1));
  } else {
    const DataDirChoice data =
        choose_data_dir("train_cifar", options_.data_dir, "pass --data-dir DIR or --synthetic",
                        parallel::process_environment());
    if (!data.notice.empty()) report_.warn(data.notice);
    train_set_ = std::make_shared<data::CifarDataset>(
        data::read_cifar10(data.dir, data::CifarSplit::Train,
                           {.limit = options_.subset, .verify = options_.verify_data}));
    test_set_ = std::make_shared<data::CifarDataset>(data::read_cifar10(
        data.dir, data::CifarSplit::Test, {.limit = test_limit, .verify = options_.verify_data}));
  }
  TANDEM_CHECK(train_set_->size() >= world_, "[train_cifar] ", train_set_->size(),
               " training images cannot be shared by ", world_, " ranks");
}

// This rank's share of the training set, and the batch counts of the ranks with the most and
// the fewest batches (which set the schedule and the last step every rank takes). The data are
// shared out over this run's ranks, whatever a checkpoint's were (Note [Resume at another world
// size] in checkpoint_keeper.cpp).
std::shared_ptr<const data::Sampler> Trainer::make_train_sampler() {
  const int64_t local_batch = options_.batch_size / world_;
  shares_.local_batch = local_batch;
  if (options_.setup.mode != Mode::Distributed) {
    shares_.batches_per_epoch =
        data::batch_count(train_set_->size(), local_batch, options_.drop_last);
    shares_.batches_all_ranks_have = shares_.batches_per_epoch;
    return std::make_shared<data::RandomSampler>(train_set_->size(), options_.setup.seed);
  }
  // Uneven shares train under a Join (Note [Join protocol]). SyncBatchNorm cannot join, and
  // with --accumulate a rank that ran out in the middle of a group would leave its micro-batches
  // unreduced while the others still run under no_sync(): with either the shares are padded,
  // as PyTorch's DistributedSampler does. So they are with --zero, whose Join is not wired here.
  shares_.uneven = !options_.drop_last && !options_.setup.sync_bn && options_.accumulate == 1 &&
                   options_.setup.ddp.sharding == parallel::Sharding::None &&
                   train_set_->size() % world_ != 0;
  data::DistributedSamplerConfig sharing{.num_replicas = world_,
                                         .rank = rank_,
                                         .shuffle = true,
                                         .seed = options_.setup.seed,
                                         .drop_last = options_.drop_last,
                                         .pad = !shares_.uneven};
  auto sampler = std::make_shared<data::DistributedSampler>(train_set_->size(), sharing);
  const auto batches_of = [&](int64_t rank) {
    sharing.rank = rank;
    return data::batch_count(data::DistributedSampler(train_set_->size(), sharing).size(),
                             local_batch, options_.drop_last);
  };
  shares_.batches_per_epoch = batches_of(0);                // rank 0's share is the largest
  shares_.batches_all_ranks_have = batches_of(world_ - 1);  // and the last rank's the smallest
  return sampler;
}

// Optimizer steps in one epoch: the batches in groups of --accumulate, the last group possibly
// shorter (Note [Accumulation]); with uneven shares, those of the rank with the most batches.
int64_t Trainer::steps_per_epoch() const {
  return (shares_.batches_per_epoch + options_.accumulate - 1) / options_.accumulate;
}

void Trainer::build_schedule() {
  const int64_t steps_per_epoch = this->steps_per_epoch();
  const int64_t total = steps_per_epoch * options_.epochs;
  const auto warmup =
      static_cast<int64_t>(options_.warmup_epochs * static_cast<double>(steps_per_epoch));
  std::shared_ptr<const nn::LrSchedule> main;
  switch (options_.schedule) {
    case Schedule::Cosine:
      main = std::make_shared<nn::CosineLr>(options_.setup.sgd.lr,
                                            std::max<int64_t>(1, total - warmup));
      break;
    case Schedule::OneCycle:
      main = std::make_shared<nn::OneCycleLr>(options_.setup.sgd.lr, std::max<int64_t>(2, total));
      break;
    case Schedule::MultiStep:
      main =
          std::make_shared<nn::MultiStepLr>(nn::MultiStepLr::paper(options_.setup.sgd.lr, total));
      break;
  }
  schedule_ = warmup > 0 ? std::make_shared<nn::WarmupLr>(main, warmup) : main;
}

std::vector<double> Trainer::sum_over_ranks(std::vector<double> values) {
  if (!group_ || world_ == 1) return values;
  std::vector<float> as_float(values.begin(), values.end());
  Tensor totals = from_vector(as_float, {static_cast<int64_t>(as_float.size())})
                      .to(group_->tensor_device());  // NCCL reduces device memory only
  group_->allreduce({totals}, parallel::ReduceOp::Sum)->wait();
  const std::vector<float> summed = totals.to_vector<float>();
  return {summed.begin(), summed.end()};
}

// Note [Stopping together]: in ddp a rank that stopped alone would leave the others waiting in an
// all-reduce until the timeout, so the ranks agree whether anyone was interrupted at the start of
// each epoch and at every host sync (Note [Host syncs]), at most kHostSyncEvery steps apart.
bool Trainer::all_ranks_continue() {
  const double stop = stop_requested().load() ? 1.0 : 0.0;
  if (!group_ || world_ == 1) return stop == 0.0;
  return sum_over_ranks({stop})[0] == 0.0;
}

// Note [Accumulation]: --accumulate micro-batches per optimizer step, each loss scaled by
// 1/(micro-batches in its group), so a step's gradient is the mean over the group's images as
// one batch of them would give (batch norm aside: it still normalises each micro-batch). DDP
// all-reduces only the group's last backward; the others run under no_sync(). Groups never
// cross an epoch, and checkpoints fall between optimizer steps (Note [Mid-epoch checkpoints]).
bool Trainer::train_batch(const data::Batch& batch, int64_t batch_index, int64_t batches,
                          parallel::Join* join, PendingSteps& pending) {
  const int64_t in_group = batch_index % options_.accumulate;
  const int64_t group_size =
      std::min<int64_t>(options_.accumulate, batches - (batch_index - in_group));
  const bool steps_now = in_group == group_size - 1;
  if (in_group == 0) {
    setup_.stepper().set_lr(schedule_->lr_at(step_));
    setup_.stepper().zero_grad();
  }
  {
    std::optional<parallel::DistributedDataParallel::NoSyncGuard> no_sync;
    if (setup_.ddp != nullptr && !steps_now) no_sync.emplace(*setup_.ddp);
    const Tensor logits = setup_.model->forward(batch.images);
    if (join != nullptr && join->stop_agreed()) return false;
    const Tensor loss = cross_entropy(logits, batch.labels);
    (group_size == 1 ? loss : mul(loss, 1.0f / static_cast<float>(group_size))).backward();
    pending.add(loss, count_correct(logits.detach(), batch.labels), batch.labels.size(0));
  }
  if (steps_now) {
    setup_.stepper().step();
    ++step_;
  }
  return true;
}

// One epoch in training on this rank: where it is, what it has summed, what it shows.
struct Trainer::Epoch {
  int number = 0;                    ///< counting from 0
  int64_t batches = 0;               ///< in the whole epoch (of the rank with the most)
  int64_t batch = 0;                 ///< the next batch to train
  int64_t first_optimizer_step = 0;  ///< the run's step count at the epoch's first batch
  /// A resumed epoch's metrics from before this invocation, summed over the ranks: rank 0
  /// carries them, the others hold zeros.
  EpochSoFar before{};
  double seconds_before = 0;  ///< its training time before this invocation
  EpochSoFar mine{};          ///< this rank's sums in this invocation
  Clock::time_point start = Clock::now();
  int64_t host_reads_before = host_read_count();
  PendingSteps pending{};
  std::optional<EpochProgress> progress{};  ///< rank 0's
  /// With uneven shares (Note [Join protocol]): the Join, over DDP and the momentum.
  std::optional<parallel::SgdJoinable> momentum{};
  std::optional<parallel::Join> join{};
};

void Trainer::begin_epoch(Epoch& epoch, int number) {
  // A resume in the middle of this epoch starts at its batch, with its metrics so far.
  const RunPosition& start = keeper_.start();
  const bool resumed_here = number == start.epoch && start.batch > 0;
  epoch.number = number;
  epoch.batch = resumed_here ? start.batch : 0;
  epoch.before = resumed_here && rank_ == 0 ? start.so_far : EpochSoFar{};
  epoch.seconds_before = resumed_here ? start.so_far.seconds : 0;
  train_loader_->start_epoch(number, epoch.batch);
  epoch.batches = train_loader_->batches_per_epoch();
  epoch.first_optimizer_step = step_ - epoch.batch / options_.accumulate;
  epoch.progress = report_.epoch_progress(number, epoch.batches, epoch.batch);
  // Note [Join protocol]: with uneven shares every DDP forward also agrees on stopping.
  // Note [Join final model]: momentum too, or the replicas would part from the next step on.
  if (shares_.uneven) {
    epoch.momentum.emplace(*setup_.optimizer, setup_.ddp->process_group());
    epoch.join.emplace(
        std::vector<std::reference_wrapper<parallel::Joinable>>{*setup_.ddp, *epoch.momentum},
        parallel::JoinOptions{.stop_requested = [] { return stop_requested().load(); }});
  }
}

// A step's loss that is not finite, or so large that training has diverged (a guess scores
// ln 10 = 2.3), ends the run in one line naming the step.
void Trainer::check_losses(const Epoch& epoch, int64_t first_batch,
                           const std::vector<double>& losses) const {
  constexpr double kDivergedLoss = 1e4;
  for (size_t i = 0; i < losses.size(); ++i) {
    if (std::isfinite(losses[i]) && losses[i] <= kDivergedLoss) continue;
    const int64_t batch = first_batch + static_cast<int64_t>(i);
    TANDEM_FAIL("[train_cifar] the loss ", std::isfinite(losses[i]) ? "diverged to " : "became ",
                losses[i], " at epoch ", epoch.number + 1, ", step ", batch + 1,
                " (optimizer step ", epoch.first_optimizer_step + batch / options_.accumulate + 1,
                ") on rank ", rank_, "; try a lower --lr");
  }
}

// Note [Host syncs]: false when the run must stop (an interrupt on any rank).
// Note [All-rank progress]: without a Join the ranks meet here anyway, to agree on going on
// (Note [Stopping together]); the same all-reduce carries their running sums, so rank 0's bar
// shows the job's loss, accuracy and speed. Under a Join every DDP forward agrees on stopping and
// a rank may already have joined, so no collective may be added: the bar shows rank 0's share.
bool Trainer::read_pending(Epoch& epoch) {
  const int64_t first_batch = epoch.batch - static_cast<int64_t>(epoch.pending.size());
  const PendingSteps::Values values = epoch.pending.read();
  check_losses(epoch, first_batch, values.losses);
  epoch.mine.loss_sum += values.loss_sum;
  epoch.mine.correct += values.correct;
  epoch.mine.images += values.images;
  EpochSoFar shown{.loss_sum = epoch.before.loss_sum + epoch.mine.loss_sum,
                   .correct = epoch.before.correct + epoch.mine.correct,
                   .images = epoch.before.images + epoch.mine.images};
  double images_now = static_cast<double>(epoch.mine.images * world_);
  bool go = true;
  if (!epoch.join) {
    const double stop = stop_requested().load() ? 1.0 : 0.0;
    const auto totals =
        sum_over_ranks({stop, shown.loss_sum, shown.correct, static_cast<double>(shown.images)});
    go = totals[0] == 0.0;
    shown = {.loss_sum = totals[1], .correct = totals[2], .images = std::llround(totals[3])};
    images_now = static_cast<double>(shown.images - epoch.before.images);
  }
  if (epoch.progress && shown.images > 0) {
    const double images = static_cast<double>(shown.images);
    epoch.progress->update({.step = epoch.batch,
                            .images_per_second = images_now / seconds_since(epoch.start),
                            .loss = shown.loss_sum / images,
                            .accuracy = shown.correct / images});
  }
  return go;
}

// The epoch's metrics so far over every rank, and its training time (rank 0's).
EpochSoFar Trainer::so_far(const Epoch& epoch) {
  const auto totals = sum_over_ranks(
      {epoch.before.loss_sum + epoch.mine.loss_sum, epoch.before.correct + epoch.mine.correct,
       static_cast<double>(epoch.before.images + epoch.mine.images)});
  return EpochSoFar{.loss_sum = totals[0],
                    .correct = totals[1],
                    .images = std::llround(totals[2]),
                    .seconds = epoch.seconds_before + seconds_since(epoch.start)};
}

std::optional<PassMetrics> Trainer::train_epoch(int number) {
  setup_.model->train();
  Epoch epoch;
  begin_epoch(epoch, number);
  if (!all_ranks_continue()) return std::nullopt;
  while (std::optional<data::Batch> batch = train_loader_->next()) {
    parallel::Join* join = epoch.join ? &*epoch.join : nullptr;
    profile_->begin_step();
    if (!train_batch(*batch, epoch.batch, epoch.batches, join, epoch.pending)) return std::nullopt;
    profile_->end_step();
    ++epoch.batch;
    const bool saves_now = keeper_.mid_epoch_save_due(step_, epoch.batch, shares_);
    const bool syncs_now = saves_now || epoch.pending.size() == kHostSyncEvery;
    if (syncs_now && !read_pending(epoch)) return std::nullopt;
    if (saves_now) {
      keeper_.save({.epoch = number, .batch = epoch.batch, .step = step_, .so_far = so_far(epoch)},
                   setup_);
    }
  }
  if (epoch.join) {
    if (!epoch.join->finish()) return std::nullopt;
    epoch.join.reset();
  }
  step_ = epoch.first_optimizer_step + steps_per_epoch();  // a rank that joined early took fewer
  if (!read_pending(epoch)) return std::nullopt;
  if (epoch.progress) epoch.progress->finish();
  const int64_t host_reads = host_read_count() - epoch.host_reads_before;
  const EpochSoFar totals = so_far(epoch);
  return PassMetrics{.loss = totals.loss_sum / static_cast<double>(totals.images),
                     .accuracy = totals.correct / static_cast<double>(totals.images),
                     .images = totals.images,
                     .seconds = totals.seconds,
                     .host_reads = host_reads};
}

PassMetrics Trainer::evaluate() {
  const auto start = Clock::now();
  // Every rank evaluates its share of the test set with rank 0's batch-norm statistics; the
  // shares differ in size, so the plain network runs (no per-forward collectives).
  nn::Module* evaluated = setup_.model.get();
  if (setup_.ddp != nullptr) {
    setup_.ddp->sync_buffers();
    evaluated = setup_.network.get();
  }
  evaluated->eval();
  NoGradGuard no_grad;
  test_loader_->start_epoch(0);
  PendingSteps batches;  // Note [Host syncs]: one read at the end
  while (std::optional<data::Batch> batch = test_loader_->next()) {
    const Tensor logits = evaluated->forward(batch->images);
    batches.add(cross_entropy(logits, batch->labels), count_correct(logits, batch->labels),
                batch->labels.size(0));
  }
  evaluated->train();
  const PendingSteps::Values values = batches.read();
  const auto totals =
      sum_over_ranks({values.loss_sum, values.correct, static_cast<double>(values.images)});
  return {.loss = totals[0] / std::max(totals[2], 1.0),
          .accuracy = totals[1] / std::max(totals[2], 1.0),
          .images = static_cast<int64_t>(totals[2]),
          .seconds = seconds_since(start)};
}

RunShape Trainer::shape() const {
  return {.setup = &setup_,
          .backend = group_ ? group_->backend_name() : "",
          .world = world_,
          .local_ranks = local_ranks_,
          .saved_world = keeper_.resumed_world_size(),
          .train_images = train_set_->size(),
          .test_images = test_set_->size(),
          .shares = shares_};
}

RunSummary Trainer::run() {
  const RunShape shape = this->shape();
  report_.print_header(shape, keeper_.start());
  report_.print_warnings(shape);
  RunSummary summary;
  if (options_.eval_only) {
    const PassMetrics test = evaluate();
    report_.report_eval(test);
    summary.last_accuracy = summary.best_accuracy = test.accuracy;
    return summary;
  }
  const RunPosition& start = keeper_.start();
  if (start.epoch >= options_.epochs) {  // --resume auto after the last epoch (else refused)
    report_.print_nothing_to_train(start.epoch);
    return summary;
  }
  if (start.epoch > 0 || start.batch > 0) {
    report_.log_position("resume", start, keeper_.resumed_world_size());
  }
  training_started() = true;
  const int last_epoch = options_.run_epochs > 0
                             ? std::min(options_.epochs, start.epoch + options_.run_epochs)
                             : options_.epochs;
  report_.start_clock(last_epoch - start.epoch);
  train_epochs(last_epoch, summary);
  report_.print_summary(summary, last_epoch);
  return summary;
}

void Trainer::train_epochs(int last_epoch, RunSummary& summary) {
  const RunPosition& start = keeper_.start();
  int64_t train_images = 0;
  for (int epoch = start.epoch; epoch < last_epoch; ++epoch) {
    const int64_t steps_done = epoch == start.epoch ? start.batch / options_.accumulate : 0;
    const float lr = schedule_->lr_at(step_ - steps_done);  // at the epoch's first step
    const std::optional<PassMetrics> train = train_epoch(epoch);
    if (!train) {
      summary.interrupted = true;
      report_.print_interrupted(epoch);
      break;
    }
    const PassMetrics test = evaluate();
    keeper_.save({.epoch = epoch + 1, .step = step_}, setup_);
    summary.epochs_done += 1;
    summary.train_seconds += train->seconds;
    train_images += train->images;
    summary.last_accuracy = test.accuracy;
    summary.best_accuracy = std::max(summary.best_accuracy, test.accuracy);
    report_.report_epoch(epoch, lr, step_, *train, test);
  }
  profile_->finish();
  if (summary.train_seconds > 0) {
    summary.images_per_second = static_cast<double>(train_images) / summary.train_seconds;
  }
  summary.flops_per_image = flops_per_image();
}

StepProfilerOptions Trainer::profile_options() const {
  return {.steps = options_.profile_steps,
          .dir = options_.profile_dir,
          .stem = "train_cifar.rank" + std::to_string(rank_),
          .process = "train_cifar rank " + std::to_string(rank_),
          .print = rank_ == 0,  // Note [One rank speaks]
          .gpu = setup_.device().is_cuda(),
          .synchronize =
              [this] {
                for (const Device& device : setup_.devices) runtime_for(device).synchronize(device);
              },
          .program = "train_cifar"};
}

double Trainer::flops_per_image() const {
  const Shape& images = train_set_->images.shape();  // (N, C, H, W)
  return nn::count_training_flops(*setup_.network, Shape(images.begin() + 1, images.end())).total();
}

}  // namespace tandem::apps
