#include "apps/common/training_setup.h"

#include <algorithm>

#include "engine/cpu_features.h"
#include "engine/device_runtime.h"
#include "engine/error.h"
#include "engine/ops/layout.h"
#include "nn/resnet.h"
#include "parallel/sync_batch_norm.h"

namespace tandem::apps {

bool gpus_by_default() {
  if (cuda_available()) return true;
  const std::string reason = cuda_unavailable_reason();
  TANDEM_CHECK(reason.rfind("CUDA is unusable", 0) != 0, "[devices] ", reason,
               "; to train on the CPU anyway, name CPU devices (--devices cpu:0, bench_cifar "
               "--device-type cpu) or --backend gloo");
  return false;
}

const parallel::BackendInfo& ddp_backend(const parallel::BackendInfo* requested) {
  if (requested != nullptr) return *requested;
  return parallel::default_backend(gpus_by_default() ? DeviceType::CUDA : DeviceType::CPU);
}

std::vector<Device> first_devices(int count, bool gpus) {
  TANDEM_CHECK(count >= 1, "[devices] dp needs at least one device, got ", count);
  if (gpus) {
    const int available = cuda_runtime().device_count();
    TANDEM_CHECK(count <= available, "[devices] dp over ", count,
                 " devices needs as many GPUs; this machine has ", available);
  }
  std::vector<Device> devices;
  devices.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) devices.push_back(gpus ? Device::cuda(i) : Device::cpu(i));
  return devices;
}

namespace {

// --devices naming a GPU where none works: said before the first allocation would, with what
// to write instead.
std::vector<Device> usable(std::vector<Device> devices, const std::string& requested) {
  const bool any_gpu =
      std::any_of(devices.begin(), devices.end(), [](const Device& d) { return d.is_cuda(); });
  TANDEM_CHECK(!any_gpu || cuda_available(), "[devices] --devices ", requested,
               " names a GPU, but ", cuda_unavailable_reason(), "; use ",
               devices.size() > 1 ? "cpu:0,cpu:1" : "cpu:0", ", or leave --devices out");
  return devices;
}

}  // namespace

std::vector<Device> choose_devices(Mode mode, const std::string& requested,
                                   const parallel::ProcessGroup* group) {
  switch (mode) {
    case Mode::Single:
      TANDEM_CHECK(requested.find(',') == std::string::npos, "[devices] --devices ", requested,
                   " lists several devices, which only --mode dp uses");
      if (!requested.empty()) return usable({Device::parse(requested)}, requested);
      return {gpus_by_default() ? Device::cuda(0) : Device::cpu()};
    case Mode::DataParallel:
      if (!requested.empty()) return usable(parallel::parse_device_list(requested), requested);
      if (gpus_by_default()) return first_devices(cuda_runtime().device_count(), true);
      return first_devices(2, false);
    case Mode::Distributed:
      TANDEM_CHECK(requested.empty(), "[devices] --mode ddp trains each rank on its process ",
                   "group's device; --devices (", requested, ") is for single and dp");
      TANDEM_CHECK(group != nullptr, "[devices] --mode ddp needs a process group");
      return {group->tensor_device()};
  }
  TANDEM_FAIL("[devices] unknown mode");
}

std::string device_list(const std::vector<Device>& devices) {
  std::string text;
  for (const Device& device : devices) {
    if (!text.empty()) text += ',';  // appends only: GCC 12 warns falsely about "," + string
    text += device.str();
  }
  return text;
}

void check_precision_runs_fast(nn::Precision precision, const std::vector<Device>& devices,
                               bool allow_slow) {
  const bool on_cpu = std::any_of(devices.begin(), devices.end(),
                                  [](const Device& device) { return device.is_cpu(); });
  if (precision != nn::Precision::BFloat16 || !on_cpu || allow_slow) return;
  const Bf16Verdict verdict = cpu_bf16_verdict();
  TANDEM_CHECK(verdict.speed != Bf16Speed::Emulated,
               "[precision] bf16 needs AVX512-BF16 (or AMX) on this CPU, which has only ",
               cpu_kernel_isa(),
               ": it would be emulated, several times slower than fp32; use --precision fp32, "
               "or --allow-slow-bf16 to run it anyway");
  TANDEM_CHECK(verdict.speed == Bf16Speed::Faster,
               "[precision] bf16 is slower than fp32 on this CPU (", verdict.reason,
               "); use --precision fp32, or --allow-slow-bf16 to run it anyway");
}

TrainingSetup make_training_setup(const SetupOptions& o, std::vector<Device> devices,
                                  const std::shared_ptr<parallel::ProcessGroup>& group,
                                  const BeforeWrapping& before_wrapping) {
  TANDEM_CHECK(!devices.empty(), "[setup] no devices to train on");
  TANDEM_CHECK(o.mode == Mode::DataParallel || devices.size() == 1, "[setup] --mode ",
               mode_name(o.mode), " trains on one device, not ", devices.size());
  TANDEM_CHECK((o.mode == Mode::Distributed) == (group != nullptr), "[setup] --mode ",
               mode_name(o.mode), o.mode == Mode::Distributed ? " needs a" : " takes no",
               " process group");
  TrainingSetup s;
  s.mode = o.mode;
  s.devices = std::move(devices);
  check_precision_runs_fast(o.precision, s.devices, o.allow_slow_bf16);
  Generator generator(o.seed);
  s.network = nn::make_resnet(o.arch, generator);
  s.network->set_precision(o.precision);
  s.network->to(s.device());
  s.memory_format = o.memory_format ? *o.memory_format : ops::preferred_memory_format(s.device());
  s.network->to(s.memory_format);
  s.optimizer = std::make_unique<nn::Sgd>(s.network->parameters(), o.sgd);
  if (before_wrapping) before_wrapping(*s.network, *s.optimizer);
  switch (o.mode) {
    case Mode::Single: s.model = s.network; break;
    case Mode::DataParallel:
      s.dp = std::make_shared<parallel::DataParallel>(s.network, s.devices, o.dp);
      s.model = s.dp;
      break;
    case Mode::Distributed:
      if (o.sync_bn) parallel::convert_sync_batchnorm(*s.network, group);
      s.ddp = std::make_shared<parallel::DistributedDataParallel>(s.network, group, o.ddp);
      if (o.grad_compression != parallel::GradCompression::None) {
        s.ddp->register_comm_hook(parallel::make_comm_hook(o.grad_compression));
      }
      s.model = s.ddp;
      // Takes its part of the momentum a checkpoint loaded (before_wrapping) on every rank.
      if (o.ddp.sharding != parallel::Sharding::None) {
        s.sharded = std::make_unique<parallel::ShardedSgd>(*s.ddp, *s.optimizer);
      }
      break;
  }
  return s;
}

}  // namespace tandem::apps
