// DistributedGradScaler (parallel/distributed_grad_scaler.h) across real processes (Gloo over
// loopback): an inf or NaN that one rank finds skips the step on every rank, the scale backs off
// on every rank, and the weights stay bit for bit the same everywhere (Note [One verdict for every
// rank]). Each body runs in every rank (TANDEM_RUN_AS_RANKS).
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "engine/tandem.h"
#include "nn/sgd.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/distributed_grad_scaler.h"
#include "parallel/zero/sharded_sgd.h"
#include "tests/support/ddp_fixtures.h"
#include "tests/support/spawn_ranks.h"

namespace tandem::parallel {
namespace {

using testing::ddp_ranks_options;
using testing::gloo_group;

std::vector<Tensor> copies(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> out;
  for (const Tensor& t : tensors) out.push_back(t.detach().clone());
  return out;
}

void expect_bitwise_equal(const std::vector<Tensor>& actual, const std::vector<Tensor>& expected,
                          const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_EQ(actual[i].to_vector<float>(), expected[i].to_vector<float>()) << what << " " << i;
  }
}

// Rank 0's values, broadcast, against this rank's.
void expect_same_on_every_rank(ProcessGroup& group, const std::vector<Tensor>& tensors,
                               const std::string& what) {
  std::vector<Tensor> root = copies(tensors);
  for (Tensor& t : root) group.broadcast({t}, 0)->wait();
  expect_bitwise_equal(tensors, root, what + " on rank " + std::to_string(group.rank()));
}

Tensor labels() {
  return from_vector<int64_t>({0, 1, 2, 0}, {4});
}

// What every rank saw after each step.
struct Seen {
  std::vector<bool> stepped;
  std::vector<float> scales;
};

// Plain DDP: rank 1's loss at step 1 is so large that its scaled gradients overflow float32 (as
// float16's would at a far smaller scale). DDP averages the ranks' gradients, so every rank's
// are inf or NaN then; the all-reduce of the flag runs all the same, one per step.
TEST(GradScalerMultiprocess, AnOverflowOnOneRankSkipsTheStepOnEveryRank) {
  TANDEM_RUN_AS_RANKS(3, ddp_ranks_options());
  auto group = gloo_group();
  auto net = testing::small_net(7);
  DistributedDataParallel model(net, group);
  nn::Sgd sgd(net->parameters(), {.lr = 0.1f, .momentum = 0.9f});
  DistributedGradScaler scaler(*group, {.growth_interval = 2});
  Seen seen;
  for (int step = 0; step < 4; ++step) {
    sgd.zero_grad();
    Tensor loss =
        cross_entropy(model.forward(testing::small_net_batch(group->rank(), step)), labels());
    if (step == 1 && group->rank() == 1) loss = mul(loss, 1e38f);
    scaler.scale(loss).backward();
    const std::vector<Tensor> before = copies(net->parameters());
    seen.stepped.push_back(scaler.step(sgd));
    scaler.update();
    seen.scales.push_back(scaler.get_scale());
    const std::string what = "step " + std::to_string(step);
    if (!seen.stepped.back()) expect_bitwise_equal(net->parameters(), before, what + " skipped");
    expect_same_on_every_rank(*group, net->parameters(), what + " weights");
  }
  EXPECT_EQ(seen.stepped, (std::vector<bool>{true, false, true, true}));
  EXPECT_EQ(seen.scales, (std::vector<float>{65536, 32768, 32768, 65536}));
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_EQ(scaler.found_inf_allreduces(), 4);
  expect_same_on_every_rank(*group, sgd.momentum_buffers(), "momentum");
}

// Sharded data parallel: each rank checks only its part of the reduced gradients. An inf written
// into rank 1's part alone (an overflow in a parameter it owns) is invisible to rank 0, which
// would step and wait in the all-gather for a rank that skipped; the all-reduce of the flag makes
// both skip.
TEST(GradScalerMultiprocess, AnInfInOneRanksPartSkipsTheShardedStepOnEveryRank) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group();
  for (const Sharding sharding : {Sharding::Optimizer, Sharding::Gradients}) {
    const std::string stage = sharding == Sharding::Optimizer ? "stage 1" : "stage 2";
    auto net = testing::small_net(7);
    DistributedDataParallel model(net, group, {.sharding = sharding});
    nn::Sgd full(net->parameters(), {.lr = 0.1f, .momentum = 0.9f});
    ShardedSgd optimizer(model, full);
    DistributedGradScaler scaler(*group);
    Seen seen;
    for (int step = 0; step < 3; ++step) {
      optimizer.zero_grad();
      scaler
          .scale(
              cross_entropy(model.forward(testing::small_net_batch(group->rank(), step)), labels()))
          .backward();
      if (step == 1 && group->rank() == 1) {
        optimizer.gradients().front().slice(0, 1).fill_(std::numeric_limits<float>::infinity());
      }
      const std::vector<Tensor> before = copies(net->parameters());
      seen.stepped.push_back(scaler.step(optimizer));
      scaler.update();
      seen.scales.push_back(scaler.get_scale());
      const std::string what = stage + " step " + std::to_string(step);
      if (!seen.stepped.back()) expect_bitwise_equal(net->parameters(), before, what + " skipped");
      expect_same_on_every_rank(*group, net->parameters(), what + " weights");
    }
    EXPECT_EQ(seen.stepped, (std::vector<bool>{true, false, true})) << stage;
    EXPECT_EQ(seen.scales, (std::vector<float>{65536, 32768, 32768})) << stage;
    EXPECT_EQ(scaler.found_inf_allreduces(), 3) << stage;
  }
}

}  // namespace
}  // namespace tandem::parallel
