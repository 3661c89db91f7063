#include "tests/support/ddp_fixtures.h"
#include "parallel/comm/init_process_group.h"

#include "engine/ops/factory.h"
#include "nn/batch_norm2d.h"
#include "nn/conv2d.h"
#include "nn/linear.h"
#include "parallel/comm/mpi/mpi_process_group.h"
#include "parallel/comm/rendezvous/launch_env.h"

namespace tandem::testing {

std::shared_ptr<parallel::ProcessGroup> gloo_group(std::chrono::milliseconds timeout) {
  return parallel::init_process_group("gloo", parallel::from_environment(), {.timeout = timeout});
}

std::shared_ptr<parallel::ProcessGroup> mpi_group(std::chrono::milliseconds timeout) {
  return parallel::init_process_group("mpi", parallel::mpi_environment(), {.timeout = timeout});
}

SpawnOptions ddp_ranks_options() {
  return {.timeout = std::chrono::seconds(180), .env = {{"TANDEM_NUM_THREADS", "1"}}};
}

std::shared_ptr<nn::Sequential> small_net(uint64_t seed) {
  auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(nn::LinearConfig{6, 5}), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(nn::LinearConfig{5, 3})});
  Generator generator(seed);
  net->reset_parameters(generator);
  return net;
}

Tensor small_net_batch(int rank, int index, uint64_t seed) {
  Generator generator(seed + 10 * static_cast<uint64_t>(rank) + static_cast<uint64_t>(index));
  return randn({4, 6}, generator);
}

std::shared_ptr<nn::Module> conv_bn_net(uint64_t seed) {
  using nn::Conv2dConfig;
  auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(Conv2dConfig{3, 8, 3, 1, 1, false}),
      std::make_shared<nn::BatchNorm2d>(nn::BatchNorm2dConfig{.channels = 8}),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Conv2d>(Conv2dConfig{8, 8, 3, 2, 1, false}),
      std::make_shared<nn::BatchNorm2d>(nn::BatchNorm2dConfig{.channels = 8}),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::AdaptiveAvgPool2d>(1, 1),
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(nn::LinearConfig{8, 10})});
  Generator generator(seed);
  net->reset_parameters(generator);
  return net;
}

}  // namespace tandem::testing
