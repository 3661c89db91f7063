// DistributedDataParallel across real processes, gradient accumulation and partial graphs:
// no_sync() micro-batches, parameters some ranks leave unused, a forward without a backward, tied
// weights. The
// whole-model comparisons with one process are in ddp_multiprocess_test.cpp.
#include <gtest/gtest.h>

#include <functional>
#include <optional>

#include "engine/ops/concat.h"
#include "engine/ops/reduce.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "parallel/distributed_data_parallel.h"
#include "tests/support/ddp_fixtures.h"
#include "tests/support/error_message.h"
#include "tests/support/spawn_ranks.h"
#include "tests/support/split_compare.h"

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;
using testing::ddp_ranks_options;
using testing::error_message;
using testing::expect_close_to_unsplit;
using testing::gloo_group;
using testing::small_net;
using testing::small_net_batch;

// The DDP model's gradients against `reference`, which summed the two ranks' batches in one
// process: DDP averages, so each is half the reference's.
void expect_the_two_ranks_average(const nn::Module& ddp_module, const nn::Module& reference) {
  const auto expected = reference.named_parameters();
  const auto actual = ddp_module.named_parameters();
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    expect_close_to_unsplit(actual[i].second.grad(), mul(expected[i].second.grad(), 0.5f),
                            expected[i].first);
  }
}

TEST(DdpMultiprocess, NoSyncAccumulatesThenAveragesEverything) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group();
  DistributedDataParallel model(small_net(3), group);
  {
    auto no_sync = model.no_sync();
    sum(model.forward(small_net_batch(group->rank(), 0))).backward();
  }
  sum(model.forward(small_net_batch(group->rank(), 1))).backward();

  // One process: the sum over both ranks' micro-batches, divided by the number of ranks.
  auto reference = small_net(3);
  for (int rank = 0; rank < 2; ++rank) {
    for (int index = 0; index < 2; ++index)
      sum(reference->forward(small_net_batch(rank, index))).backward();
  }
  const auto expected = reference->parameters();
  const auto actual = model.module().parameters();
  for (size_t i = 0; i < expected.size(); ++i) {
    expect_close_to_unsplit(actual[i].grad(), mul(expected[i].grad(), 0.5f),
                            "parameter " + std::to_string(i));
  }
}

// Gradient accumulation as train_cifar does it (Note [Accumulation]): 2 ranks × 3 micro-batches
// of 4 rows, each mean loss scaled by 1/3, the first two under no_sync(), equal one process
// taking the mean loss over all 24 rows at once.
TEST(DdpMultiprocess, AccumulatedMicroBatchesEqualOneBigBatch) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group();
  const int micro_batches = 3;
  DistributedDataParallel model(small_net(3), group);
  for (int index = 0; index < micro_batches; ++index) {
    std::optional<DistributedDataParallel::NoSyncGuard> no_sync;
    if (index + 1 < micro_batches) no_sync.emplace(model);
    mul(mean(model.forward(small_net_batch(group->rank(), index))), 1.0f / micro_batches)
        .backward();
  }
  auto reference = small_net(3);
  std::vector<Tensor> rows;
  for (int rank = 0; rank < 2; ++rank) {
    for (int index = 0; index < micro_batches; ++index)
      rows.push_back(small_net_batch(rank, index));
  }
  mean(reference->forward(cat(rows))).backward();
  const auto expected = reference->parameters();
  const auto actual = model.module().parameters();
  for (size_t i = 0; i < expected.size(); ++i) {
    expect_close_to_unsplit(actual[i].grad(), expected[i].grad(), "parameter " + std::to_string(i));
  }
}

// Rank 0 uses the second head, rank 1 does not.
class TwoHeads final : public nn::Module {
 public:
  TwoHeads() {
    body_ = register_module("body", std::make_shared<nn::Linear>(nn::LinearConfig{6, 4}));
    head_ = register_module("head", std::make_shared<nn::Linear>(nn::LinearConfig{4, 2}));
    extra_ = register_module("extra", std::make_shared<nn::Linear>(nn::LinearConfig{4, 2}));
    Generator generator(5);
    reset_parameters(generator);
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h = relu(body_->forward(x));
    return use_extra ? add(head_->forward(h), extra_->forward(h)) : head_->forward(h);
  }
  std::string describe() const override { return "TwoHeads"; }
  bool use_extra = false;

 protected:
  std::shared_ptr<Module> make_twin() const override { return std::make_shared<TwoHeads>(); }

 private:
  std::shared_ptr<nn::Linear> body_, head_, extra_;
};

TEST(DdpMultiprocess, ParametersUnusedOnSomeRanksDoNotHang) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group(20s);
  auto net = std::make_shared<TwoHeads>();
  net->use_extra = group->rank() == 0;
  DdpOptions options;
  options.reducer.find_unused_parameters = true;
  options.reducer.first_bucket_mb = 1e-9;  // one parameter per bucket
  options.reducer.bucket_cap_mb = 1e-9;
  DistributedDataParallel model(net, group, options);
  for (int step = 0; step < 2; ++step) {
    model.zero_grad();
    sum(model.forward(small_net_batch(group->rank(), step))).backward();

    TwoHeads reference;
    for (int rank = 0; rank < 2; ++rank) {
      reference.use_extra = rank == 0;
      sum(reference.forward(small_net_batch(rank, step))).backward();
    }
    // Rank 1 never touched extra.*, yet gets the average: rank 0's gradient over two.
    expect_the_two_ranks_average(model.module(), reference);
  }
}

// --- Regression tests of the review's defects (shared/reviews/2026-11-23-parallel.md, D1-D5),
// each its probe: they failed (wrong gradients, a hang, a silent desync) before the fixes.

DdpOptions one_parameter_per_bucket(bool find_unused, bool bucket_views = false) {
  DdpOptions options;
  options.reducer.find_unused_parameters = find_unused;
  options.reducer.gradient_as_bucket_view = bucket_views;
  options.reducer.first_bucket_mb = 1e-9;
  options.reducer.bucket_cap_mb = 1e-9;
  return options;
}

// Two micro-steps, the first under no_sync(); `uses_extra(rank, step)` says whether rank uses
// the extra head in that step. Every gradient must be the sum over both ranks and both steps,
// over two (review D1, probes nosync_a and nosync_b).
void expect_no_sync_with_unused_parameters_averages(
    const std::function<bool(int, int)>& uses_extra) {
  auto group = gloo_group(20s);
  auto net = std::make_shared<TwoHeads>();
  DistributedDataParallel model(net, group, one_parameter_per_bucket(true));
  for (int step = 0; step < 2; ++step) {
    net->use_extra = uses_extra(group->rank(), step);
    std::optional<DistributedDataParallel::NoSyncGuard> no_sync;
    if (step == 0) no_sync.emplace(model);
    sum(model.forward(small_net_batch(group->rank(), step))).backward();
  }
  TwoHeads reference;
  for (int rank = 0; rank < 2; ++rank) {
    for (int step = 0; step < 2; ++step) {
      reference.use_extra = uses_extra(rank, step);
      sum(reference.forward(small_net_batch(rank, step))).backward();
    }
  }
  expect_the_two_ranks_average(model.module(), reference);
}

TEST(DdpMultiprocess, NoSyncGradientsOfParametersUnusedInTheSyncedStepAreAveraged) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  // nosync_a: both ranks use the extra head under no_sync only.
  expect_no_sync_with_unused_parameters_averages([](int, int step) { return step == 0; });
}

TEST(DdpMultiprocess, NoSyncGradientsMeetAnotherRanksSyncedGradients) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  // nosync_b: rank 0 uses the extra head only under no_sync, rank 1 only in the synced step.
  expect_no_sync_with_unused_parameters_averages(
      [](int rank, int step) { return rank == 0 ? step == 0 : step == 1; });
}

TEST(DdpMultiprocess, AForwardWithoutBackwardLaunchesNothing) {
  // Review D2 (probe fwd_no_bwd): unused parameters marked ready in forward launched their
  // buckets' all-reduces on one rank only; the next step then hung until the timeout.
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group(10s);
  auto net = std::make_shared<TwoHeads>();
  net->use_extra = group->rank() == 1;
  DistributedDataParallel model(net, group, one_parameter_per_bucket(true));
  model.forward(small_net_batch(group->rank(), 0));  // grad mode, no backward (an evaluation)
  sum(model.forward(small_net_batch(group->rank(), 1))).backward();
  TwoHeads reference;
  for (int rank = 0; rank < 2; ++rank) {
    reference.use_extra = rank == 1;
    sum(reference.forward(small_net_batch(rank, 1))).backward();
  }
  expect_the_two_ranks_average(model.module(), reference);
}

TEST(DdpMultiprocess, AForwardAfterAnUnfinishedBackwardIsRefused) {
  // Review D3 (probe bwd_throw): rank 1's backward throws after some buckets launched, and the
  // caller skips the batch. Its next forward must refuse instead of pairing its buckets with
  // the other rank's next step; rank 0, left waiting for rank 1's buckets, gets an error too.
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group(5s);
  auto net = small_net(3);
  DistributedDataParallel model(net, group, one_parameter_per_bucket(false));
  if (group->rank() == 1) {
    net->parameters().back().register_post_accumulate_grad_hook(
        [](const Tensor&) { TANDEM_FAIL("boom (a simulated failure in backward)"); });
  }
  const std::string first =
      error_message([&] { sum(model.forward(small_net_batch(group->rank(), 0))).backward(); });
  if (group->rank() == 0) {
    EXPECT_NE(first.find("[DDP] all-reduce of gradient bucket"), std::string::npos) << first;
    return;
  }
  EXPECT_NE(first.find("boom"), std::string::npos) << first;
  const std::string second = error_message([&] { model.forward(small_net_batch(1, 1)); });
  EXPECT_NE(second.find("[DDP] expected to have finished reduction in the prior iteration"),
            std::string::npos)
      << second;
  EXPECT_NE(second.find("restart the job"), std::string::npos) << second;
}

// A Linear applied twice: its weight and bias are registered under two names (tied weights).
class Tied final : public nn::Module {
 public:
  Tied() {
    shared_ = std::make_shared<nn::Linear>(nn::LinearConfig{6, 6});
    register_module("first", shared_);
    register_module("second", shared_);
    Generator generator(9);
    reset_parameters(generator);
  }
  Tensor forward(const Tensor& x) override { return shared_->forward(relu(shared_->forward(x))); }
  std::string describe() const override { return "Tied"; }

 protected:
  std::shared_ptr<Module> make_twin() const override { return std::make_shared<Tied>(); }

 private:
  std::shared_ptr<nn::Linear> shared_;
};

TEST(DdpMultiprocess, TiedWeightsAreAveragedOnceWithBucketViews) {
  // Review D4 (probe tied_view): the tied tensor had two bucket slots, and with
  // gradient_as_bucket_view its gradient was scaled by 1/world twice.
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group(20s);
  DistributedDataParallel model(std::make_shared<Tied>(), group,
                                one_parameter_per_bucket(false, /*bucket_views=*/true));
  ASSERT_EQ(model.reducer().bucket_assignment().size(), 2u);  // weight and bias, once each
  sum(model.forward(small_net_batch(group->rank(), 0))).backward();
  Tied reference;
  for (int rank = 0; rank < 2; ++rank) sum(reference.forward(small_net_batch(rank, 0))).backward();
  ASSERT_EQ(model.module().named_parameters().size(), 2u);
  expect_the_two_ranks_average(model.module(), reference);
}

}  // namespace
}  // namespace tandem::parallel
