// Join (parallel/join.h): DDP ranks with different numbers of batches, as real processes (Gloo
// over loopback). Each test body runs in every rank (TANDEM_RUN_AS_RANKS) and, where it checks
// numbers, compares with one process that applies, step by step, the gradient Join promises.
#include <gtest/gtest.h>

#include "nn/linear.h"
#include "nn/sgd.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/join.h"
#include "parallel/sgd_joinable.h"
#include "parallel/sync_batch_norm.h"
#include "tests/support/ddp_fixtures.h"
#include "tests/support/error_message.h"
#include "tests/support/image_batch.h"
#include "tests/support/tensor_compare.h"

namespace tandem::parallel {
namespace {

using testing::ddp_ranks_options;
using testing::gloo_group;

// Other batches than the DDP tests' (ddp_multiprocess_test.cpp).
Tensor micro_batch(int rank, int step) {
  return testing::small_net_batch(rank, step, /*seed=*/200);
}

const nn::SgdConfig kSgd{.lr = 0.1f, .momentum = 0.9f};

struct JoinCase {
  std::vector<int> batches;  ///< per rank
  bool divide_by_initial_world_size = true;
  bool find_unused_parameters = false;
  float momentum = kSgd.momentum;  ///< 0: SGD never creates momentum buffers
};

// One process: at step k the gradient is the sum of the losses of the ranks that still have a
// batch, divided by the world size (or by how many still train).
struct Trained {
  std::shared_ptr<nn::Module> net;
  std::unique_ptr<nn::Sgd> optimizer;
};

Trained reference_training(const JoinCase& c) {
  auto net = testing::small_net(3);
  auto optimizer = std::make_unique<nn::Sgd>(net->parameters(),
                                             nn::SgdConfig{.lr = kSgd.lr, .momentum = c.momentum});
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

// Every rank's `state` equals rank 0's (a collective).
void expect_alike_on_every_rank(ProcessGroup& group, const std::vector<Tensor>& state) {
  std::vector<Tensor> from_rank0;
  for (const Tensor& t : state) from_rank0.push_back(t.clone());
  broadcast_coalesced(group, from_rank0, 0);
  for (size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(state[i].to(DType::Float32).to_vector<float>(),
              from_rank0[i].to(DType::Float32).to_vector<float>())
        << "state tensor " << i << " differs between rank 0 and rank " << group.rank();
  }
}

void run_join_case(const std::shared_ptr<ProcessGroup>& group, const JoinCase& c) {
  DdpOptions options;
  options.reducer.first_bucket_mb = 1e-9;  // one parameter per bucket: several reductions
  options.reducer.bucket_cap_mb = 1e-9;
  options.reducer.find_unused_parameters = c.find_unused_parameters;
  DistributedDataParallel model(testing::small_net(3), group, options);
  nn::Sgd optimizer(model.parameters(), {.lr = kSgd.lr, .momentum = c.momentum});
  SgdJoinable momentum(optimizer, *group);
  Join join({model, momentum}, {.divide_by_initial_world_size = c.divide_by_initial_world_size});
  for (int k = 0; k < c.batches[static_cast<size_t>(group->rank())]; ++k) {
    optimizer.zero_grad();
    sum(model.forward(micro_batch(group->rank(), k))).backward();
    optimizer.step();
  }
  EXPECT_TRUE(join.finish());

  const Trained reference = reference_training(c);
  const auto expected = reference.net->parameters();
  const auto actual = model.module().parameters();
  for (size_t i = 0; i < expected.size(); ++i) {
    const std::string what =
        "parameter " + std::to_string(i) + " on rank " + std::to_string(group->rank());
    testing::expect_close_to_reference(actual[i], expected[i], what);
    const Tensor& momentum = reference.optimizer->momentum_buffers()[i];
    if (!momentum.defined()) {
      EXPECT_FALSE(optimizer.momentum_buffers()[i].defined()) << what << "'s momentum";
      continue;
    }
    testing::expect_close_to_reference(optimizer.momentum_buffers()[i], momentum,
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

// Review 2026-11-26 N2: optimizer state that is undefined on some rank. Before, finish() threw
// "[Join] finish(): a tensor to equalise is undefined" (or Gloo aborted on lists of different
// lengths); now a rank takes every tensor its source has, and none the source lacks.
TEST(DdpJoinMultiprocess, UndefinedMomentumIsEqualised) {
  TANDEM_RUN_AS_RANKS(3, ddp_ranks_options());
  auto group = gloo_group(std::chrono::seconds(10));
  run_join_case(group, {.batches = {0, 3, 2}});                    // a rank without a batch
  run_join_case(group, {.batches = {1, 3, 2}, .momentum = 0.0f});  // no buffer anywhere
  run_join_case(group, {.batches = {2, 0, 0}, .momentum = 0.0f});
}

// A parameter first used (and stepped) after rank 0 joined: its momentum exists on the ranks
// that trained on, and rank 0 must take it.
class LateHead final : public nn::Module {
 public:
  LateHead() {
    body_ = register_module("body", std::make_shared<nn::Linear>(nn::LinearConfig{6, 4}));
    late_ = register_module("late", std::make_shared<nn::Linear>(nn::LinearConfig{4, 2}));
    Generator generator(5);
    reset_parameters(generator);
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h = body_->forward(x);
    return use_late ? late_->forward(relu(h)) : h;
  }
  std::string describe() const override { return "LateHead"; }
  bool use_late = false;

 protected:
  std::shared_ptr<Module> make_twin() const override { return std::make_shared<LateHead>(); }

 private:
  std::shared_ptr<nn::Linear> body_, late_;
};

TEST(DdpJoinMultiprocess, MomentumOfAParameterFirstSteppedAfterARankJoinedIsEqualised) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group(std::chrono::seconds(10));
  auto net = std::make_shared<LateHead>();
  DdpOptions options;
  options.reducer.find_unused_parameters = true;
  DistributedDataParallel model(net, group, options);
  nn::Sgd optimizer(model.parameters(), kSgd);
  SgdJoinable momentum(optimizer, *group);
  Join join({model, momentum});
  for (int k = 0; k < (group->rank() == 0 ? 1 : 3); ++k) {
    net->use_late = k > 0;
    optimizer.zero_grad();
    sum(model.forward(micro_batch(group->rank(), k))).backward();
    optimizer.step();
  }
  ASSERT_TRUE(join.finish());
  std::vector<Tensor> state;
  for (const auto& [name, tensor] : model.module().state_dict()) state.push_back(tensor);
  for (const Tensor& momentum : optimizer.momentum_buffers()) {
    ASSERT_TRUE(momentum.defined()) << "rank " << group->rank();
    state.push_back(momentum);
  }
  expect_alike_on_every_rank(*group, state);
}

// State lists that cannot be made alike (here of different lengths) fail on every rank with one
// [Join] error, instead of a broadcast of mismatched sizes (Gloo aborted the process).
TEST(DdpJoinMultiprocess, OptimizerStateThatCannotBeEqualisedFailsOnEveryRank) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group(std::chrono::seconds(10));
  std::vector<Tensor> like{zeros({3}), zeros({2})};
  std::vector<Tensor> state{ones({3})};
  if (group->rank() == 0) state.push_back(ones({2}));
  const std::string message =
      testing::error_message([&] { broadcast_optimizer_state(*group, state, like, /*source=*/0); });
  EXPECT_NE(message.find("[Join] the optimizer state to equalise differs from rank 0's on "
                         "rank(s) 1"),
            std::string::npos)
      << message;
}

// Batch norm in training mode: buffers travel each step, and after finish() every rank holds
// the same parameters, buffers and momentum, although rank 1 skipped two steps.
TEST(DdpJoinMultiprocess, EveryRankEndsWithTheSameModelAndOptimizerState) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group();
  DistributedDataParallel model(testing::conv_bn_net(5), group);
  nn::Sgd optimizer(model.parameters(), kSgd);
  SgdJoinable momentum(optimizer, *group);
  Join join({model, momentum});
  const int batches = group->rank() == 0 ? 3 : 1;
  for (int k = 0; k < batches; ++k) {
    const auto batch = testing::random_image_batch(4, 300 + 10 * group->rank() + k);
    optimizer.zero_grad();
    cross_entropy(model.forward(batch.images), batch.labels).backward();
    optimizer.step();
  }
  ASSERT_TRUE(join.finish());

  std::vector<Tensor> state;
  for (const auto& [name, tensor] : model.module().state_dict()) state.push_back(tensor);
  for (const Tensor& momentum : optimizer.momentum_buffers()) state.push_back(momentum);
  expect_alike_on_every_rank(*group, state);
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
