#include "apps/bench_cifar/worker.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "apps/bench_cifar/profiled_steps.h"
#include "apps/bench_cifar/timed_steps.h"
#include "apps/common/training_setup.h"
#include "data/cifar10.h"
#include "data/data_loader.h"
#include "engine/error.h"
#include "engine/tandem.h"
#include "nn/flop_count.h"
#include "parallel/comm/backends.h"
#include "parallel/comm/init_process_group.h"
#include "parallel/data_parallel.h"
#include "parallel/distributed_data_parallel.h"

namespace tandem::apps::bench {
namespace {

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
      o.real ? data::read_cifar10(o.data_dir, data::CifarSplit::Train,
                                  {.limit = images, .verify = o.verify_data})
             : data::synthetic_cifar10(images, o.setup.seed);
  TANDEM_CHECK(dataset.size() >= images, "[bench_cifar] ", o.data_dir, " holds ", dataset.size(),
               " training images, fewer than the ", images, " needed");
  std::vector<data::Batch> pool;
  for (int64_t k = 0; k < batches; ++k) {
    std::vector<int64_t> indices(local);
    for (int64_t i = 0; i < local; ++i) indices[i] = k * config.batch + rank * local + i;
    data::Batch batch = data::make_batch(dataset, indices, data::eval_transform(), o.setup.seed);
    pool.push_back({batch.images.to(device).contiguous(format), batch.labels.to(device)});
  }
  return pool;
}

// Peak resident set size of this process so far, MiB.
double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

// The largest of `own` over the ranks. The exchange runs on the rank's own device, which is what
// a NCCL group needs.
double largest_over_ranks(parallel::ProcessGroup* group, Device device, double own) {
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
    const parallel::BackendInfo& backend =
        o.backend
            ? *o.backend
            : parallel::default_backend(gpus ? tandem::DeviceType::CUDA : tandem::DeviceType::CPU);
    const parallel::DistributedEnv env = backend.environment();
    rank = env.rank;  // known before the rendezvous, which may fail
    group = parallel::init_process_group(backend.name, env);
    rank = group->rank(), world = group->size();
    TANDEM_CHECK(world == config.devices, "[bench_cifar] a ddp worker for ", config.devices,
                 " processes runs in a job of ", world);
  }
  TrainingSetup setup =
      make_training_setup(setup_options(o, config), devices_of(config, gpus, group.get()), group);
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
  run_timed_steps({.warmup = o.warmup, .steps = o.steps, .phase_sync = o.phase_sync}, config.batch,
                  setup, pool, group.get(), m);
  // After the timed steps, whose peak RSS the copy it counts on should not raise.
  const Shape& images = pool.front().images.shape();  // (N, C, H, W)
  m.flops_per_image =
      nn::count_training_flops(*setup.network, Shape(images.begin() + 1, images.end())).total();
  m.gflop_per_s = m.images_per_s * m.flops_per_image / 1e9;
  if (!o.profile_dir.empty()) profile_steps(o, config, setup, pool, rank);
  if (setup.ddp) {
    const parallel::ModelStateBytes bytes =
        setup.ddp->model_state_bytes(setup.stepper().state_bytes());
    m.state_bytes = largest_over_ranks(
        group.get(), setup.device(),
        static_cast<double>(bytes.parameters + bytes.gradients + bytes.optimizer));
  }
  m.peak_rss_mb = largest_over_ranks(group.get(), setup.device(), peak_rss_mb());
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
