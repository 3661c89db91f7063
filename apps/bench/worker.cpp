#include "apps/bench/worker.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "apps/bench/host.h"
#include "data/cifar10.h"
#include "data/data_loader.h"
#include "engine/error.h"
#include "engine/tandem.h"
#include "nn/resnet.h"
#include "nn/sgd.h"
#include "parallel/comm_hook.h"
#include "parallel/data_parallel.h"
#include "parallel/distributed_data_parallel.h"

namespace tandem::apps::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Distinct batches cycled through: enough that no step reuses the previous one's memory, few
// enough that the pool adds little to the peak RSS.
constexpr int64_t kPoolBatches = 4;
constexpr int64_t kCifarTrainImages = 50000;

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// Where this process computes: dp's replicas, or the one device of single and of a ddp rank.
std::vector<Device> devices_for(const BenchConfig& config, int local_rank) {
  const bool gpus = cuda_available();
  if (config.mode == "ddp") return {gpus ? Device::cuda(local_rank) : Device::cpu()};
  if (config.mode == "single") return {gpus ? Device::cuda(0) : Device::cpu()};
  if (gpus) {
    const int available = cuda_backend().device_count();
    TANDEM_CHECK(config.devices <= available, "[bench_cifar] dp over ", config.devices,
                 " devices needs as many GPUs; this machine has ", available);
  }
  std::vector<Device> devices;
  devices.reserve(static_cast<size_t>(config.devices));
  for (int i = 0; i < config.devices; ++i)
    devices.push_back(gpus ? Device::cuda(i) : Device::cpu(i));
  return devices;
}

std::string describe_devices(const std::vector<Device>& devices,
                             const parallel::ProcessGroup* group) {
  std::string text;
  for (const Device& device : devices) text += (text.empty() ? "" : ",") + device.str();
  if (group) text += " per rank (" + group->backend_name() + ")";
  return text;
}

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

// Sums over the timed steps; divided by their number at the end.
struct Totals {
  double forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
  parallel::DataParallelTimings dp;
  double comm_ms = 0, hidden_ms = 0, wait_ms = 0, grad_bytes = 0;
  std::vector<BucketStat> buckets;
  int bucket_steps = 0;  ///< steps whose bucket layout matched the last one's

  void add(const parallel::DataParallelTimings& step) {
    dp.scatter_ms += step.scatter_ms;
    dp.replicate_ms += step.replicate_ms;
    dp.apply_ms += step.apply_ms;
    dp.gather_ms += step.gather_ms;
    dp.reduce_ms += step.reduce_ms;
  }

  void add(const parallel::ReducerStepStats& step) {
    comm_ms += step.comm_ms;
    hidden_ms += step.hidden_fraction * step.comm_ms;
    wait_ms += step.wait_ms;
    grad_bytes += static_cast<double>(step.payload_bytes);
    // The layout changes once (the rebuild at step 2, Note [Bucket ordering]); a warm-up of 0
    // can time a step from before it, which the per-bucket means leave out.
    if (buckets.size() != step.buckets.size()) {
      buckets.assign(step.buckets.size(), BucketStat{});
      bucket_steps = 0;
    }
    for (size_t k = 0; k < step.buckets.size(); ++k) {
      const parallel::BucketTiming& b = step.buckets[k];
      buckets[k].parameters = b.parameters;
      buckets[k].bytes = static_cast<double>(b.bytes);
      buckets[k].ready_ms += b.ready_ms;
      buckets[k].started_ms += b.started_ms;
      buckets[k].ended_ms += b.ended_ms;
    }
    ++bucket_steps;
  }

  // The means over `steps` timed steps.
  void write_means(int steps, Measurement& m) const {
    const double n = steps;
    m.forward_ms = forward_ms / n;
    m.backward_ms = backward_ms / n;
    m.optimizer_ms = optimizer_ms / n;
    m.scatter_ms = dp.scatter_ms / n;
    m.replicate_ms = dp.replicate_ms / n;
    m.apply_ms = dp.apply_ms / n;
    m.gather_ms = dp.gather_ms / n;
    m.reduce_ms = dp.reduce_ms / n;
    m.comm_ms = comm_ms / n;
    m.wait_ms = wait_ms / n;
    m.grad_bytes_per_step = grad_bytes / n;
    m.hidden_fraction = comm_ms > 0 ? hidden_ms / comm_ms : 0;
    const double bucket_n = std::max(1, bucket_steps);
    for (BucketStat b : buckets) {
      b.ready_ms /= bucket_n;
      b.started_ms /= bucket_n;
      b.ended_ms /= bucket_n;
      m.buckets.push_back(b);
    }
  }
};

struct Setup {
  std::vector<Device> devices;
  MemoryFormat memory_format = MemoryFormat::Contiguous;  ///< of the network and the batches
  std::shared_ptr<nn::Module> network;                    ///< the bare ResNet
  std::shared_ptr<nn::Module> model;  ///< what the step calls: network, DataParallel or DDP
  std::unique_ptr<nn::Sgd> optimizer;
};

Setup build_model(const BenchOptions& o, const BenchConfig& config,
                  std::shared_ptr<parallel::ProcessGroup> group, int local_rank) {
  Setup s;
  s.devices = devices_for(config, local_rank);
  Generator generator(o.seed);
  s.network = nn::make_resnet(o.arch, generator);
  s.network->to(s.devices.front());
  s.memory_format = o.memory_format == "auto" ? ops::preferred_memory_format(s.devices.front())
                                              : parse_memory_format(o.memory_format);
  s.network->to(s.memory_format);
  if (config.mode == "dp") {
    s.model = std::make_shared<parallel::DataParallel>(s.network, s.devices);
  } else if (config.mode == "ddp") {
    parallel::DdpOptions ddp;
    ddp.reducer.bucket_cap_mb = o.bucket_cap_mb;
    ddp.reducer.first_bucket_mb = std::min(o.first_bucket_mb, o.bucket_cap_mb);
    ddp.reducer.overlap = config.overlap != "off";
    auto model =
        std::make_shared<parallel::DistributedDataParallel>(s.network, std::move(group), ddp);
    model->register_comm_hook(parallel::make_comm_hook(parallel::parse_grad_compression(
        config.compression.empty() ? "none" : config.compression)));
    s.model = model;
  } else {
    s.model = s.network;
  }
  s.optimizer = std::make_unique<nn::Sgd>(
      s.network->parameters(), nn::SgdConfig{.lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f});
  return s;
}

void synchronize(const std::vector<Device>& devices) {
  for (const Device& device : devices) backend_for(device).synchronize(device);
}

// Runs the warm-up and timed steps; fills the timing fields of `m`.
void run_steps(const BenchOptions& o, const BenchConfig& config, Setup& s,
               const std::vector<data::Batch>& pool, parallel::ProcessGroup* group,
               Measurement& m) {
  Totals t;
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
    // it. (Keeping it once also delayed every AccumulateGrad, and with it DDP's buckets, to the
    // end of the next backward; the engine now runs accumulators first: Note [Accumulate first].)
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
    t.forward_ms += ms_between(t0, t1);
    t.backward_ms += ms_between(t1, t2);
    t.optimizer_ms += ms_between(t2, t3);
    if (auto* dp = dynamic_cast<parallel::DataParallel*>(s.model.get())) t.add(dp->last_timings());
    if (auto* ddp = dynamic_cast<parallel::DistributedDataParallel*>(s.model.get())) {
      t.add(ddp->reducer().last_step());
    }
  }
  const double elapsed_ms = ms_between(start, Clock::now());
  m.ms_per_step = elapsed_ms / o.steps;
  m.images_per_s = static_cast<double>(config.batch) * o.steps / (elapsed_ms / 1e3);
  t.write_means(o.steps, m);
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

// Measures worker_config(o); `rank` is set as soon as it is known, for the error file.
Measurement measure(const BenchOptions& o, int& rank) {
  const BenchConfig config = worker_config(o);
  const std::string problem = config_problem(config);
  TANDEM_CHECK(problem.empty(), problem);
  std::shared_ptr<parallel::ProcessGroup> group;
  int local_rank = 0, world = 1;
  if (config.mode == "ddp") {
    const parallel::DistributedEnv env = parallel::from_environment();
    rank = env.rank;  // known before the rendezvous, which may fail
    group = parallel::init_process_group(cuda_available() ? "nccl" : "gloo", env);
    rank = group->rank(), world = group->size(), local_rank = env.local_rank;
    TANDEM_CHECK(world == config.devices, "[bench_cifar] a ddp worker for ", config.devices,
                 " processes runs in a job of ", world);
  }
  Setup setup = build_model(o, config, group, local_rank);
  const std::vector<data::Batch> pool =
      make_pool(o, config, rank, world, setup.devices.front(), setup.memory_format);
  Measurement m;
  m.device = setup.devices.front().is_cuda() ? "cuda" : "cpu";
  m.device_list = describe_devices(setup.devices, group.get());
  m.memory_format = memory_format_name(setup.memory_format);
  m.processes = world;
  m.threads_per_process = num_threads();
  // dp scatters like torch.chunk: the first replica gets the largest share.
  m.local_batch = config.mode == "dp" ? (config.batch + config.devices - 1) / config.devices
                                      : pool.front().labels.size(0);
  for (const Tensor& p : setup.network->parameters())
    m.parameter_bytes += static_cast<double>(p.nbytes());
  run_steps(o, config, setup, pool, group.get(), m);
  m.peak_rss_mb = peak_rss_over_ranks(group.get(), setup.devices.front());
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
