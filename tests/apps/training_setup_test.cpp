// The training setup train_cifar and bench_cifar share: the devices each mode picks, the wrapper
// it builds, and the errors for combinations that do not fit.
#include "apps/common/training_setup.h"

#include <gtest/gtest.h>

#include "apps/common/mode.h"
#include "engine/device_runtime.h"
#include "engine/ops/layout.h"
#include "parallel/sync_batch_norm.h"
#include "tests/support/ddp_fixtures.h"
#include "tests/support/spawn_ranks.h"

namespace tandem::apps {
namespace {

// What a user would read: tandem::Error's message, without the file:line of what().
template <typename Fn>
std::string error_message(const Fn& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.message();
  }
  return "(no error)";
}

TEST(Mode, NamesRoundTrip) {
  for (Mode mode : {Mode::Single, Mode::DataParallel, Mode::Distributed}) {
    EXPECT_EQ(parse_mode(mode_name(mode)), mode);
  }
  EXPECT_STREQ(mode_name(Mode::DataParallel), "dp");
  EXPECT_EQ(error_message([] { parse_mode("fsdp"); }),
            "[mode] unknown mode 'fsdp': single, dp or ddp");
}

TEST(TrainingSetup, DefaultDevicesFollowPyTorch) {
  const std::vector<Device> single = choose_devices(Mode::Single, "", nullptr);
  const std::vector<Device> dp = choose_devices(Mode::DataParallel, "", nullptr);
  if (cuda_available()) {
    EXPECT_EQ(single, std::vector<Device>{Device::cuda(0)});
    EXPECT_EQ(dp.size(), static_cast<size_t>(cuda_runtime().device_count()));
  } else {
    // dp without GPUs: two virtual CPU devices, whatever the program (train_cifar, bench_cifar)
    EXPECT_EQ(single, std::vector<Device>{Device::cpu()});
    EXPECT_EQ(dp, (std::vector<Device>{Device::cpu(0), Device::cpu(1)}));
  }
  // CPU devices named on purpose, GPUs or not (bench_cifar --device-type cpu)
  EXPECT_EQ(first_devices(3, false),
            (std::vector<Device>{Device::cpu(0), Device::cpu(1), Device::cpu(2)}));
}

// As a PyTorch script picks its backend: nccl where CUDA runs, else gloo; --backend wins.
TEST(TrainingSetup, DdpBackendIsNcclOnGpusElseGloo) {
  EXPECT_STREQ(ddp_backend(nullptr).name, cuda_available() ? "nccl" : "gloo");
  for (const char* name : {"gloo", "nccl", "mpi"}) {
    const parallel::BackendInfo& requested = parallel::find_backend(name);
    EXPECT_EQ(&ddp_backend(&requested), &requested) << name;
  }
}

TEST(TrainingSetup, RequestedDevicesAreParsed) {
  EXPECT_EQ(choose_devices(Mode::Single, "cpu:1", nullptr), std::vector<Device>{Device::cpu(1)});
  EXPECT_EQ(choose_devices(Mode::DataParallel, "cpu:0,cpu:0,cpu:1", nullptr),
            (std::vector<Device>{Device::cpu(0), Device::cpu(0), Device::cpu(1)}));
  EXPECT_EQ(device_list({Device::cpu(0), Device::cpu(1)}), "cpu:0,cpu:1");
}

TEST(TrainingSetup, DevicesThatDoNotFitTheModeAreOneLineErrors) {
  EXPECT_EQ(error_message([] { choose_devices(Mode::Single, "cpu:0,cpu:1", nullptr); }),
            "[devices] --devices cpu:0,cpu:1 lists several devices, which only --mode dp uses");
  EXPECT_NE(error_message([] {
              choose_devices(Mode::Distributed, "cpu:0", nullptr);
            }).find("--devices (cpu:0) is for single and dp"),
            std::string::npos);
  EXPECT_EQ(error_message([] { choose_devices(Mode::Distributed, "", nullptr); }),
            "[devices] --mode ddp needs a process group");
  EXPECT_EQ(error_message([] { first_devices(0, false); }),
            "[devices] dp needs at least one device, got 0");
  EXPECT_EQ(
      error_message([] {
        make_training_setup({.mode = Mode::Single}, {Device::cpu(0), Device::cpu(1)}, nullptr);
      }),
      "[setup] --mode single trains on one device, not 2");
  EXPECT_EQ(error_message(
                [] { make_training_setup({.mode = Mode::Distributed}, {Device::cpu()}, nullptr); }),
            "[setup] --mode ddp needs a process group");
}

TEST(TrainingSetup, SingleTrainsTheBareNetwork) {
  const TrainingSetup s = make_training_setup(
      {.mode = Mode::Single, .memory_format = MemoryFormat::Contiguous}, {Device::cpu()}, nullptr);
  EXPECT_EQ(s.model, s.network);
  EXPECT_EQ(s.dp, nullptr);
  EXPECT_EQ(s.ddp, nullptr);
  EXPECT_EQ(s.memory_format, MemoryFormat::Contiguous);
  EXPECT_EQ(s.optimizer->parameters().size(), s.network->parameters().size());
}

// --memory-format auto (nullopt) is the device's preferred format.
TEST(TrainingSetup, NoMemoryFormatMeansTheDevicesPreferredOne) {
  const TrainingSetup s = make_training_setup({.mode = Mode::Single}, {Device::cpu()}, nullptr);
  EXPECT_EQ(s.memory_format, ops::preferred_memory_format(Device::cpu()));
}

TEST(TrainingSetup, DataParallelWrapsTheNetworkOverItsDevices) {
  const nn::Module* loaded = nullptr;  // what a checkpoint would be loaded into
  const TrainingSetup s = make_training_setup(
      {.mode = Mode::DataParallel, .arch = "resnet20", .memory_format = MemoryFormat::ChannelsLast},
      choose_devices(Mode::DataParallel, "cpu:0,cpu:1", nullptr), nullptr,
      [&](nn::Module& network, nn::Sgd&) { loaded = &network; });
  EXPECT_EQ(loaded, s.network.get());
  ASSERT_NE(s.dp, nullptr);
  EXPECT_EQ(s.model, s.dp);
  EXPECT_EQ(s.ddp, nullptr);
  EXPECT_EQ(s.device(), Device::cpu(0));
  EXPECT_EQ(s.memory_format, MemoryFormat::ChannelsLast);
}

TEST(TrainingSetupMultiprocess, DistributedWrapsTheNetworkOnTheGroupsDevice) {
  TANDEM_RUN_AS_RANKS(2, testing::ddp_ranks_options());
  const auto group = testing::gloo_group();
  const TrainingSetup s =
      make_training_setup({.mode = Mode::Distributed,
                           .grad_compression = parallel::GradCompression::BFloat16,
                           .sync_bn = true},
                          choose_devices(Mode::Distributed, "", group.get()), group);
  ASSERT_NE(s.ddp, nullptr);
  EXPECT_EQ(s.model, s.ddp);
  EXPECT_EQ(s.dp, nullptr);
  EXPECT_EQ(s.device(), group->tensor_device());
  EXPECT_TRUE(parallel::has_sync_batchnorm(*s.network));
}

}  // namespace
}  // namespace tandem::apps
