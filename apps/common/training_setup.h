#pragma once
/// The one way train_cifar and bench_cifar assemble what they train: mode → devices → ResNet →
/// wrapper (none, DataParallel or DistributedDataParallel) → SGD, so that the benchmark measures
/// the object the trainer trains.
///
///   TrainingSetup s = make_training_setup({.mode = Mode::DataParallel},
///                                         choose_devices(Mode::DataParallel, "", nullptr),
///                                         nullptr);
///   cross_entropy(s.model->forward(images.to(s.device())), labels).backward();

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/common/mode.h"
#include "engine/device.h"
#include "engine/memory_format.h"
#include "nn/precision.h"
#include "nn/sgd.h"
#include "parallel/comm/backends.h"
#include "parallel/comm_hook.h"
#include "parallel/data_parallel.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/zero/sharded_sgd.h"

namespace tandem::apps {

/// dp over `count` devices: cuda:0 … cuda:count-1 when `gpus` (there must be that many), else
/// the virtual CPU devices cpu:0 … cpu:count-1, which share the cores.
std::vector<Device> first_devices(int count, bool gpus);

/// Whether device defaults go to GPUs: true when CUDA can run. Where a GPU is present but CUDA
/// cannot use it (a driver older than the build's CUDA needs), defaults never quietly fall back to
/// the CPU, where the run would be many times slower: that throws, naming the driver and the fix.
bool gpus_by_default();

/// The process group of a ddp rank: `requested` (--backend, a row of parallel::backends()), else
/// the table's first for the devices defaults go to (gpus_by_default()): nccl where CUDA can run,
/// else gloo, as a PyTorch script picks it.
const parallel::BackendInfo& ddp_backend(const parallel::BackendInfo* requested);

/// The devices of a `mode` process given --devices `requested` (empty: the default):
/// - single: the one device named, else cuda:0 when there is a GPU, else the CPU;
/// - dp: the list named (repeats allowed), else every GPU, else cpu:0,cpu:1 (as PyTorch's
///   DataParallel takes every visible GPU);
/// - ddp: the process group's device (cuda:<local rank> under NCCL); --devices must be empty.
/// Throws a one-line "[devices] …" for a combination that does not fit the mode.
std::vector<Device> choose_devices(Mode mode, const std::string& requested,
                                   const parallel::ProcessGroup* group);

/// "cpu:0,cpu:1": the devices as --devices lists them.
std::string device_list(const std::vector<Device>& devices);

struct SetupOptions {
  Mode mode = Mode::Single;
  std::string arch = "resnet20";
  uint64_t seed = 0;  ///< of the weights
  /// As --memory-format; nullopt (auto): the first device's preferred format.
  std::optional<MemoryFormat> memory_format{};
  nn::SgdConfig sgd{};
  parallel::DataParallelOptions dp{};  ///< dp: persistent or rebuilt replicas
  parallel::DdpOptions ddp{};          ///< ddp: buckets, overlap, sharding (--zero)
  parallel::GradCompression grad_compression = parallel::GradCompression::None;  ///< ddp
  bool sync_bn = false;  ///< ddp: parallel::convert_sync_batchnorm before wrapping
  nn::Precision precision = nn::Precision::Float32;  ///< Note [Mixed precision]
  bool allow_slow_bf16 = false;  ///< bf16 where it is slower than fp32 (check_precision_runs_fast)
};

struct TrainingSetup {
  Mode mode = Mode::Single;
  std::vector<Device> devices;  ///< single, ddp: the one device; dp: a replica's each
  MemoryFormat memory_format = MemoryFormat::Contiguous;  ///< of the network and the batches
  std::shared_ptr<nn::Module> network;         ///< the bare ResNet: checkpoints hold its weights
  std::shared_ptr<nn::Module> model;           ///< what forward() runs: network, *dp or *ddp
  std::shared_ptr<parallel::DataParallel> dp;  ///< dp mode only
  std::shared_ptr<parallel::DistributedDataParallel> ddp;  ///< ddp mode only
  /// Over the network's parameters: what checkpoints save and load. With sharding (--zero) it
  /// holds no momentum (`sharded` took its part): step stepper() instead.
  std::unique_ptr<nn::Sgd> optimizer;
  std::unique_ptr<parallel::ShardedSgd> sharded;  ///< ddp with sharding only

  /// The optimizer that steps the model: `sharded` where there is one, else `optimizer`.
  nn::Optimizer& stepper() const {
    return sharded ? static_cast<nn::Optimizer&>(*sharded) : *optimizer;
  }
  /// Where batches go (dp: the first replica's device, which scatters them).
  Device device() const { return devices.front(); }
};

/// Throws a one-line "[precision] …" when `precision` is bf16 on a CPU device where it trains
/// slower than float32 (cpu_bf16_verdict(), Note [Where bf16 pays]): a CPU without bfloat16
/// instructions, where oneDNN would emulate it, or an Intel CPU with AVX512-BF16 but no AMX. The
/// line names --precision fp32; `allow_slow` (--allow-slow-bf16: memory, numerics studies) lets
/// it run.
void check_precision_runs_fast(nn::Precision precision, const std::vector<Device>& devices,
                               bool allow_slow);

/// Runs between building the network and SGD and wrapping them, e.g. loading a checkpoint (DDP's
/// constructor then broadcasts rank 0's loaded weights).
using BeforeWrapping = std::function<void(nn::Module& network, nn::Sgd& optimizer)>;

/// Builds options.arch on `devices` (choose_devices or first_devices) and wraps it for
/// options.mode; ddp needs `group`. Throws a one-line "[setup] …" for a bad combination.
TrainingSetup make_training_setup(const SetupOptions& options, std::vector<Device> devices,
                                  const std::shared_ptr<parallel::ProcessGroup>& group,
                                  const BeforeWrapping& before_wrapping = {});

}  // namespace tandem::apps
