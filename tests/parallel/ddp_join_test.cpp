// Join (parallel/join.h): DDP ranks with different numbers of batches, as real processes (Gloo
// over loopback). Each test body runs in every rank (TANDEM_RUN_AS_RANKS) and, where it checks
// numbers, compares with one process that applies, step by step, the gradient Join promises.
#include <gtest/gtest.h>

#include "nn/sgd.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/join.h"
#include "parallel/sync_batch_norm.h"
#include "tests/support/ddp_fixtures.h"
#include "tests/support/error_message.h"
#include "tests/support/image_batch.h"
#include "tests/support/tensor_compare.h"

namespace tandem::parallel {
namespace {

using testing::ddp_ranks_options;
using testing::gloo_group;

Tensor micro_batch(int rank, int step) {
  Generator generator(200 + 10 * static_cast<uint64_t>(rank) + static_cast<uint64_t>(step));
  return randn({4, 6}, generator);
}

const nn::SgdConfig kSgd{.lr = 0.1f, .momentum = 0.9f};

struct JoinCase {
  std::vector<int> batches;  ///< per rank
  bool divide_by_initial_world_size = true;
  bool find_unused_parameters = false;
};

// One process: at step k the gradient is the sum of the losses of the ranks that still have a
// batch, divided by the world size (or by how many still train).
struct Trained {
  std::shared_ptr<nn::Module> net;
  std::unique_ptr<nn::Sgd> optimizer;
};

Trained reference_training(const JoinCase& c) {
  auto net = testing::small_net(3);
  auto optimizer = std::make_unique<nn::Sgd>(net->parameters(), kSgd);
  const int world = static_cast<int>(c.batches.size());
  const int steps = *std::max_element(c.batches.begin(), c.batches.end());
  for (int k = 0; k < steps; ++k) {
    optimizer->zero_grad();
    int training = 0;
    for (int r = 0; r < world; ++r) training += c.batches[static_cast<size_t>(r)] > k ? 1 : 0;
    const float divisor = static_cast<float>(c.divide_by_initial_world_size ? world : training);
    for (int r = 0; r < world; ++r) {
      if (c.batches[static_cast<size_t>(r)] <= k) continue;
      mul(sum(net->forward(micro_batch(r, k))), 1.0f / divisor).backward();
    }
    optimizer->step();
  }
  return {net, std::move(optimizer)};
}

void run_join_case(const std::shared_ptr<ProcessGroup>& group, const JoinCase& c) {
  DdpOptions options;
  options.reducer.first_bucket_mb = 1e-9;  // one parameter per bucket: several reductions
  options.reducer.bucket_cap_mb = 1e-9;
  options.reducer.find_unused_parameters = c.find_unused_parameters;
  DistributedDataParallel model(testing::small_net(3), group, options);
  nn::Sgd optimizer(model.parameters(), kSgd);
  Join join(model, {.divide_by_initial_world_size = c.divide_by_initial_world_size});
  for (int k = 0; k < c.batches[static_cast<size_t>(group->rank())]; ++k) {
    optimizer.zero_grad();
    sum(model.forward(micro_batch(group->rank(), k))).backward();
    optimizer.step();
  }
  EXPECT_TRUE(join.finish(optimizer.momentum_buffers()));

  const Trained reference = reference_training(c);
  const auto expected = reference.net->parameters();
  const auto actual = model.module().parameters();
  for (size_t i = 0; i < expected.size(); ++i) {
    const std::string what =
        "parameter " + std::to_string(i) + " on rank " + std::to_string(group->rank());
    testing::expect_close_to_reference(actual[i], expected[i], what);
    testing::expect_close_to_reference(optimizer.momentum_buffers()[i],
                                       reference.optimizer->momentum_buffers()[i],
                                       what + "'s momentum");
  }
}

// Rank 1 trains longest, rank 0 stops first: the final model must come from rank 1, and rank 0
// joins before the buckets are rebuilt (at the second step), so its shadow must rebuild too.
TEST(DdpJoinMultiprocess, UnevenBatchesTrainLikeOneProcess) {
  TANDEM_RUN_AS_RANKS(3, ddp_ranks_options());
  auto group = gloo_group();
  run_join_case(group, {.batches = {1, 4, 2}});
  run_join_case(group, {.batches = {1, 4, 2}, .divide_by_initial_world_size = false});
  run_join_case(group, {.batches = {3, 1, 3}, .find_unused_parameters = true});
  run_join_case(group, {.batches = {2, 2, 2}});  // even: Join changes nothing
}

// Batch norm in training mode: buffers travel each step, and after finish() every rank holds
// the same parameters, buffers and momentum, although rank 1 skipped two steps.
TEST(DdpJoinMultiprocess, EveryRankEndsWithTheSameModelAndOptimizerState) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group();
  DistributedDataParallel model(testing::conv_bn_net(5), group);
  nn::Sgd optimizer(model.parameters(), kSgd);
  Join join(model);
  const int batches = group->rank() == 0 ? 3 : 1;
  for (int k = 0; k < batches; ++k) {
    const auto batch = testing::random_image_batch(4, 300 + 10 * group->rank() + k);
    optimizer.zero_grad();
    cross_entropy(model.forward(batch.images), batch.labels).backward();
    optimizer.step();
  }
  ASSERT_TRUE(join.finish(optimizer.momentum_buffers()));

  std::vector<Tensor> state;
  for (const auto& [name, tensor] : model.module().state_dict()) state.push_back(tensor.clone());
  for (const Tensor& momentum : optimizer.momentum_buffers()) state.push_back(momentum.clone());
  std::vector<Tensor> from_rank0;
  for (const Tensor& t : state) from_rank0.push_back(t.clone());
  broadcast_coalesced(*group, from_rank0, 0);
  for (size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(state[i].to(DType::Float32).to_vector<float>(),
              from_rank0[i].to(DType::Float32).to_vector<float>())
        << "state tensor " << i << " differs between rank 0 and rank " << group->rank();
  }
}

// An interrupt on one rank reaches every rank in the same step: the training rank sees
// stop_agreed() after that step's forward, the joined rank's finish() returns false.
TEST(DdpJoinMultiprocess, AStopOnOneRankReachesEveryRankInTheSameStep) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group();
  DistributedDataParallel model(testing::small_net(3), group);
  int step = 0;
  const bool trains_long = group->rank() == 1;
  Join join(model, {.stop_requested = [&] { return trains_long && step == 2; }});
  int stopped_at = -1;
  for (step = 0; step < (trains_long ? 5 : 1); ++step) {
    const Tensor loss = sum(model.forward(micro_batch(group->rank(), step)));
    if (join.stop_agreed()) {
      stopped_at = step;
      break;
    }
    loss.backward();
  }
  if (trains_long) {
    EXPECT_EQ(stopped_at, 2);
  } else {
    EXPECT_FALSE(join.finish());
  }
}

TEST(DdpJoinMultiprocess, SyncBatchNormIsRefused) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group();
  auto net = testing::conv_bn_net(5);
  convert_sync_batchnorm(*net, group);
  DistributedDataParallel model(net, group);
  EXPECT_NE(testing::error_message([&] { Join join(model); }).find("SyncBatchNorm cannot join"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::parallel
