#include "apps/bench_cifar/worker.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "apps/common/training_setup.h"
#include "data/cifar10.h"
#include "data/data_loader.h"
#include "engine/elapsed.h"
#include "engine/error.h"
#include "engine/tandem.h"
#include "parallel/comm/mpi_process_group.h"
#include "parallel/data_parallel.h"
#include "parallel/distributed_data_parallel.h"

namespace tandem::apps::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Distinct batches cycled through: enough that no step reuses the previous one's memory, few
// enough that the pool adds little to the peak RSS.
constexpr int64_t kPoolBatches = 4;
constexpr int64_t kCifarTrainImages = 50000;

// The batches the steps cycle through, on `device`. A ddp rank takes its own slice of every
// global batch, as a DistributedSampler would.
std::vector<data::Batch> make_pool(const BenchOptions& o, const BenchConfig& config, int rank,
                                   int world, Device device, MemoryFormat format) {
  const int64_t local = config.batch / world;
  const int64_t batches =
      std::clamp<int64_t>(std::min<int64_t>(o.warmup + o.steps, kPoolBatches), 1,
                          std::max<int64_t>(1, kCifarTrainImages / config.batch));
  const int64_t images = batches * config.batch;
  const data::CifarDataset dataset =
      o.real ? data::read_cifar10(o.data_dir, data::CifarSplit::Train, images)
             : data::synthetic_cifar10(images, o.seed);
  TANDEM_CHECK(dataset.size() >= images, "[bench_cifar] ", o.data_dir, " holds ", dataset.size(),
               " training images, fewer than the ", images, " needed");
  std::vector<data::Batch> pool;
  for (int64_t k = 0; k < batches; ++k) {
    std::vector<int64_t> indices(local);
    for (int64_t i = 0; i < local; ++i) indices[i] = k * config.batch + rank * local + i;
    data::Batch batch = data::make_batch(dataset, indices, data::eval_transform(), o.seed);
    pool.push_back({batch.images.to(device).contiguous(format), batch.labels.to(device)});
  }
  return pool;
}

// Per-bucket sums over the timed steps, for the per-bucket means.
struct BucketTotals {
  std::vector<BucketStat> buckets;
  int steps = 0;  ///< steps whose bucket layout matched the last one's

  void add(const parallel::ReducerStepStats& step) {
    // The layout changes once (the rebuild at step 2, Note [Bucket ordering]); a warm-up of 0
    // can time a step from before it, which the per-bucket means leave out.
    if (buckets.size() != step.buckets.size()) {
      buckets.assign(step.buckets.size(), BucketStat{});
      steps = 0;
    }
    for (size_t k = 0; k < step.buckets.size(); ++k) {
      const parallel::BucketTiming& b = step.buckets[k];
      buckets[k].parameters = b.parameters;
      buckets[k].bytes = static_cast<double>(b.bytes);
      buckets[k].ready_ms += b.ready_ms;
      buckets[k].started_ms += b.started_ms;
      buckets[k].ended_ms += b.ended_ms;
    }
    ++steps;
  }

  std::vector<BucketStat> means() const {
    std::vector<BucketStat> out = buckets;
    const double n = std::max(1, steps);
    for (BucketStat& b : out) {
      b.ready_ms /= n;
      b.started_ms /= n;
      b.ended_ms /= n;
    }
    return out;
  }
};

// What the wrapper reports of its last step: DataParallel's phases, or DDP's communication.
void add_wrapper_timings(const TrainingSetup& s, Measurement& step, BucketTotals& buckets) {
  if (s.dp) {
    const parallel::DataParallelTimings& t = s.dp->last_timings();
    step.scatter_ms = t.scatter_ms;
    step.replicate_ms = t.replicate_ms;
    step.apply_ms = t.apply_ms;
    step.gather_ms = t.gather_ms;
    step.reduce_ms = t.reduce_ms;
  }
  if (s.ddp) {
    const parallel::ReducerStepStats& r = s.ddp->reducer().last_step();
    step.comm_ms = r.comm_ms;
    step.hidden_fraction = r.hidden_fraction;
    step.wait_ms = r.wait_ms;
    step.grad_bytes_per_step = static_cast<double>(r.payload_bytes);
    buckets.add(r);
  }
}

void synchronize(const std::vector<Device>& devices) {
  for (const Device& device : devices) runtime_for(device).synchronize(device);
}

// Runs the warm-up and timed steps; fills the timing fields of `m`.
void run_steps(const BenchOptions& o, const BenchConfig& config, TrainingSetup& s,
               const std::vector<data::Batch>& pool, parallel::ProcessGroup* group,
               Measurement& m) {
  Measurement sums;
  BucketTotals buckets;
  Clock::time_point start;
  for (int i = 0; i < o.warmup + o.steps; ++i) {
    if (i == o.warmup) {
      if (group) group->barrier()->wait();  // the ranks start the clock together
      synchronize(s.devices);
      start = Clock::now();
    }
    const data::Batch& batch = pool[static_cast<size_t>(i) % pool.size()];
    const auto t0 = Clock::now();
    s.optimizer->zero_grad();
    // Note [Loss per step]: the loss lives only for its own step, so its graph's memory goes with
    // it.
    Tensor loss = cross_entropy(s.model->forward(batch.images), batch.labels);
    synchronize(s.devices);
    const auto t1 = Clock::now();
    loss.backward();
    synchronize(s.devices);
    const auto t2 = Clock::now();
    s.optimizer->step();
    synchronize(s.devices);
    const auto t3 = Clock::now();
    if (i + 1 == o.warmup + o.steps) m.final_loss = loss.item();
    if (i < o.warmup) continue;
    Measurement step;
    step.forward_ms = milliseconds_between(t0, t1);
    step.backward_ms = milliseconds_between(t1, t2);
    step.optimizer_ms = milliseconds_between(t2, t3);
    add_wrapper_timings(s, step, buckets);
    add_step(sums, step);
  }
  const double elapsed_ms = milliseconds_between(start, Clock::now());
  m.ms_per_step = elapsed_ms / o.steps;
  m.images_per_s = static_cast<double>(config.batch) * o.steps / (elapsed_ms / 1e3);
  set_step_means(m, sums, o.steps);
  m.buckets = buckets.means();
}

// Peak resident set size of this process so far, MiB.
double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

// The largest peak RSS over the ranks. The exchange runs on the rank's own device, which is
// what a NCCL group needs.
double peak_rss_over_ranks(parallel::ProcessGroup* group, Device device) {
  const double own = peak_rss_mb();
  if (!group || group->size() == 1) return own;
  std::vector<Tensor> all;
  all.reserve(static_cast<size_t>(group->size()));
  for (int r = 0; r < group->size(); ++r) all.push_back(zeros({1}, {.device = device}));
  group->allgather(all, full({1}, own, {.device = device}))->wait();
  double largest = own;
  for (const Tensor& t : all) largest = std::max(largest, t.item());
  return largest;
}

void write_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary);
    out << text;
    TANDEM_CHECK(out.good(), "[bench_cifar] cannot write ", temporary);
  }
  std::filesystem::rename(temporary, path);
}

// --device-type: auto follows the programs' default (GPUs where CUDA can run); cpu and cuda name
// the devices on purpose, so that a test or a comparison does not depend on the machine.
bool uses_gpus(DeviceType device_type) {
  switch (device_type) {
    case DeviceType::Cpu: return false;
    case DeviceType::Auto: return gpus_by_default();
    case DeviceType::Cuda:
      TANDEM_CHECK(cuda_available(), "[bench_cifar] --device-type cuda, but ",
                   cuda_unavailable_reason());
      return true;
  }
  TANDEM_FAIL("[bench_cifar] unknown device type");
}

std::vector<Device> devices_of(const BenchConfig& config, bool gpus,
                               const parallel::ProcessGroup* group) {
  switch (config.mode) {
    case Mode::Single: return {gpus ? Device::cuda(0) : Device::cpu()};
    case Mode::DataParallel: return first_devices(config.devices, gpus);
    case Mode::Distributed: return choose_devices(config.mode, "", group);
  }
  TANDEM_FAIL("[bench_cifar] unknown mode");
}

// Measures worker_config(o); `rank` is set as soon as it is known, for the error file.
Measurement measure(const BenchOptions& o, int& rank) {
  const BenchConfig config = worker_config(o);
  const std::string problem = config_problem(config);
  TANDEM_CHECK(problem.empty(), problem);
  const bool gpus = uses_gpus(o.device_type);
  std::shared_ptr<parallel::ProcessGroup> group;
  int world = 1;
  if (config.mode == Mode::Distributed) {
    const std::string backend = o.backend ? backend_name(*o.backend) : (gpus ? "nccl" : "gloo");
    const parallel::DistributedEnv env =
        backend == "mpi" ? parallel::mpi_environment() : parallel::from_environment();
    rank = env.rank;  // known before the rendezvous, which may fail
    group = parallel::init_process_group(backend, env);
    rank = group->rank(), world = group->size();
    TANDEM_CHECK(world == config.devices, "[bench_cifar] a ddp worker for ", config.devices,
                 " processes runs in a job of ", world);
  }
  TrainingSetup setup = make_training_setup(
      {.mode = config.mode,
       .arch = o.arch,
       .seed = o.seed,
       .memory_format = o.memory_format,
       .sgd = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f},
       .dp = {.persistent_replicas = config.dp_replicas != Replicas::Rebuilt},
       .ddp = {.reducer = {.first_bucket_mb = o.first_bucket_mb,
                           .bucket_cap_mb = o.bucket_cap_mb,
                           .overlap = config.overlap != Overlap::Off}},
       .grad_compression = config.compression.value_or(parallel::GradCompression::None),
       .precision = config.precision,
       .allow_slow_bf16 = o.allow_slow_bf16},
      devices_of(config, gpus, group.get()), group);
  const std::vector<data::Batch> pool =
      make_pool(o, config, rank, world, setup.device(), setup.memory_format);
  Measurement m;
  m.device = setup.device().is_cuda() ? "cuda" : "cpu";
  m.device_list = device_list(setup.devices);
  if (group) m.device_list += " per rank (" + group->backend_name() + ")";
  m.memory_format = setup.memory_format;
  m.processes = world;
  m.threads_per_process = num_threads();
  // dp scatters like torch.chunk: the first replica gets the largest share.
  m.local_batch = config.mode == Mode::DataParallel
                      ? (config.batch + config.devices - 1) / config.devices
                      : pool.front().labels.size(0);
  for (const Tensor& p : setup.network->parameters())
    m.parameter_bytes += static_cast<double>(p.nbytes());
  run_steps(o, config, setup, pool, group.get(), m);
  m.peak_rss_mb = peak_rss_over_ranks(group.get(), setup.device());
  if (group) group->barrier()->wait();  // no rank leaves while another still needs it
  return m;
}

}  // namespace

std::string error_file(const std::string& result_path, int rank) {
  return result_path + ".error." + std::to_string(rank);
}

int run_worker(const BenchOptions& options) {
  int rank = 0;
  try {
    const Measurement m = measure(options, rank);
    if (rank == 0) write_atomically(options.worker_json, to_json(m).dump(2));
    return 0;
  } catch (const std::exception& e) {
    std::string message = message_of(e);
    if (message.rfind("[bench_cifar]", 0) != 0) message = "[bench_cifar] " + message;
    std::fprintf(stderr, "%s\n", message.c_str());
    try {
      write_atomically(error_file(options.worker_json, rank), message);
    } catch (const std::exception&) {
      // The parent falls back to the launcher's message and the log.
    }
    return 1;
  }
}

}  // namespace tandem::apps::bench
