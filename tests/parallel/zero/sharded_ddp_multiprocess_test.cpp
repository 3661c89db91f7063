// Sharded data parallel (ZeRO stages 1 and 2, parallel/zero/sharded_sgd.h) across real processes:
// the weights and momentum after a few steps against plain DDP's in the same ranks, the bytes each
// rank holds, and what is refused. Each body runs in every rank (TANDEM_RUN_AS_RANKS, or mpirun).
// Stage 3's own tests: stage3_multiprocess_test.cpp.
//
// The bound: tests/support/sharded_training.h (measured: stage 2 bit for bit on Gloo at 3 ranks
// and MPI at 2, ~1e-7 of the largest value on Gloo at 4 ranks).
#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "engine/ops/loss.h"
#include "nn/sgd.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/join.h"
#include "parallel/sgd_joinable.h"
#include "parallel/sync_batch_norm.h"
#include "parallel/zero/sharded_sgd.h"
#include "tests/support/ddp_fixtures.h"
#include "tests/support/error_message.h"
#include "tests/support/image_batch.h"
#include "tests/support/mpirun_ranks.h"
#include "tests/support/sharded_training.h"
#include "tests/support/spawn_ranks.h"
#include "tests/support/tensor_compare.h"

namespace tandem::parallel {
namespace {

using testing::bound_against_ddp;
using testing::conv_bn_net;
using testing::ddp_ranks_options;
using testing::error_message;
using testing::expect_like_ddp;
using testing::expect_stages_like_ddp;
using testing::gloo_group;
using testing::kShardedRows;
using testing::mpi_group;
using testing::sharded_options;
using testing::train_sharded;
using testing::Trained;
using testing::Variant;

TEST(ShardedDdpMultiprocess, StagesOneAndTwoStepLikeDdpOnThreeRanks) {
  TANDEM_RUN_AS_RANKS(3, ddp_ranks_options());
  expect_stages_like_ddp(gloo_group(), {Sharding::Optimizer, Sharding::Gradients});
}

// The weights differ somewhere in their bits.
bool weights_differ(const Trained& a, const Trained& b) {
  for (size_t i = 0; i < a.weights.size(); ++i) {
    if (a.weights[i].to_vector<float>() != b.weights[i].to_vector<float>()) return true;
  }
  return false;
}

// Stage 1 is plain DDP bit for bit only over the same buckets. Plain DDP rebuilds its buckets from
// the first step's arrival order by default, ZeRO never (its shards live in them): at 3 ranks the
// rebuilt buckets put elements where Gloo's ring adds their terms in another order, so from the
// second step stage 1 rounds differently, within the bound above (the rounding of the gradient,
// carried through the next steps), not bit for bit.
TEST(ShardedDdpMultiprocess, StageOneIsDdpBitForBitOnlyOverTheSameBucketsOnThreeRanks) {
  TANDEM_RUN_AS_RANKS(3, ddp_ranks_options());
  auto group = gloo_group();
  const nn::SgdConfig config{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f};
  const Trained rebuilt =
      train_sharded(group, Sharding::None, config, 3, 1, {.rebuild_buckets = true});
  const Trained kept = train_sharded(group, Sharding::None, config, 3, 1);
  const Trained stage1 = train_sharded(group, Sharding::Optimizer, config, 3, 1);
  EXPECT_NE(rebuilt.buckets, stage1.buckets) << "the rebuild moved some parameter";
  EXPECT_EQ(kept.buckets, stage1.buckets);
  expect_like_ddp(stage1, kept, 0.0, "stage 1 against DDP's buckets kept");
  expect_like_ddp(stage1, rebuilt, testing::kReductionOrderBound,
                  "stage 1 against DDP's buckets rebuilt");
  // Measured: ~1e-7 of the largest weight after 3 steps. Should it ever be bit for bit, say so
  // in docs/parallel.md ("The same result as DDP") and here.
  EXPECT_TRUE(weights_differ(stage1, rebuilt)) << "bit for bit over rebuilt buckets";
}

// bf16 compute keeps float32 parameters, gradients and momentum (Note [Mixed precision]), and
// SyncBatchNorm's collectives run in forward and backward beside the buckets': neither changes
// what sharding does. At 4 ranks, where stage 2 rounds differently from DDP (the bound above).
TEST(ShardedDdpMultiprocess, StagesOneAndTwoStepLikeDdpInBf16AndWithSyncBatchNormOnFourRanks) {
  TANDEM_RUN_AS_RANKS(4, ddp_ranks_options());
  auto group = gloo_group();
  const nn::SgdConfig config{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f};
  for (const Variant& variant :
       {Variant{.precision = nn::Precision::BFloat16}, Variant{.sync_bn = true}}) {
    const Trained ddp = train_sharded(group, Sharding::None, config, 2, 1, variant);
    for (const Sharding sharding : {Sharding::Optimizer, Sharding::Gradients}) {
      expect_like_ddp(
          train_sharded(group, sharding, config, 2, 1, variant), ddp,
          bound_against_ddp(sharding, group->size()),
          std::string(sharding_name(sharding)) + (variant.sync_bn ? ", SyncBatchNorm" : ", bf16"));
    }
  }
}

// Note [Sharded reductions]: the fp16 and bf16 hooks reduce-scatter the bucket in 16 bits as they
// all-reduce it; two ranks add each element once either way. A hook of one's own without
// reduce_scatter() is refused at stage 2 when its first bucket launches.
TEST(ShardedDdpMultiprocess, CompressionHooksReduceScatterAndOthersAreRefused) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group();
  const nn::SgdConfig config{.lr = 0.1f, .momentum = 0.9f};
  for (const GradCompression compression : {GradCompression::Float16, GradCompression::BFloat16}) {
    const Variant variant{.compression = compression};
    const Trained ddp = train_sharded(group, Sharding::None, config, 2, 1, variant);
    expect_like_ddp(train_sharded(group, Sharding::Gradients, config, 2, 1, variant), ddp,
                    testing::kReductionOrderBound, grad_compression_name(compression));
  }
  class AllreduceOnly final : public CommHook {
   public:
    std::string name() const override { return "allreduce-only"; }
    std::shared_ptr<Work> reduce(ProcessGroup& group, const GradBucket& bucket) override {
      return group.allreduce({bucket.buffer}, ReduceOp::Sum);
    }
    size_t payload_bytes(int64_t elements) const override {
      return static_cast<size_t>(elements) * sizeof(float);
    }
  };
  DistributedDataParallel model(conv_bn_net(7), group, sharded_options(Sharding::Gradients));
  model.register_comm_hook(std::make_shared<AllreduceOnly>());
  const auto batch = testing::random_image_batch(kShardedRows, 5);
  const std::string message =
      error_message([&] { cross_entropy(model.forward(batch.images), batch.labels).backward(); });
  EXPECT_NE(message.find("'allreduce-only' has no reduce_scatter()"), std::string::npos) << message;
}

TEST(ShardedDdpMpiMultiprocess, StagesOneAndTwoStepLikeDdpOnTwoRanks) {
  TANDEM_RUN_UNDER_MPIRUN(2);
  expect_stages_like_ddp(mpi_group(), {Sharding::Optimizer, Sharding::Gradients});
}

// Join with uneven inputs (Note [Sharded data parallel], Join): rank r trains batches[r] steps;
// a rank that has joined goes on stepping its part. Plain DDP under a Join (SgdJoinable
// equalising the momentum at the end) is the reference. Returns the weights and, on rank 0, the
// whole momentum.
Trained train_joined(const std::shared_ptr<ProcessGroup>& group, Sharding sharding,
                     const std::vector<int>& batches) {
  auto net = conv_bn_net(7);
  DistributedDataParallel model(net, group, sharded_options(sharding));
  nn::Sgd sgd(net->parameters(), {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f});
  std::unique_ptr<ShardedSgd> sharded;
  std::unique_ptr<SgdJoinable> momentum;
  std::vector<std::reference_wrapper<Joinable>> joinables{model};
  if (sharding != Sharding::None) {
    sharded = std::make_unique<ShardedSgd>(model, sgd);
    joinables.emplace_back(*sharded);
  } else {
    momentum = std::make_unique<SgdJoinable>(sgd, *group);
    joinables.emplace_back(*momentum);
  }
  nn::Optimizer& optimizer = sharded ? static_cast<nn::Optimizer&>(*sharded) : sgd;
  Join join(joinables);
  for (int step = 0; step < batches.at(static_cast<size_t>(group->rank())); ++step) {
    optimizer.zero_grad();
    const auto batch =
        testing::random_image_batch(kShardedRows, 2000 + 100 * static_cast<uint64_t>(step) +
                                                      static_cast<uint64_t>(group->rank()));
    cross_entropy(model.forward(batch.images), batch.labels).backward();
    optimizer.step();
  }
  EXPECT_TRUE(join.finish());
  Trained out;
  for (const Tensor& p : net->parameters()) out.weights.push_back(p.detach().clone());
  std::unique_ptr<nn::Sgd> whole = sharded ? sharded->consolidated(0) : nullptr;
  if (group->rank() == 0) {
    for (const Tensor& buffer : (sharded ? *whole : sgd).momentum_buffers()) {
      out.momentum.push_back(buffer);
    }
  }
  return out;
}

TEST(ShardedDdpMultiprocess, JoinedRanksStepTheirPartsAsPlainDdpUnderJoin) {
  TANDEM_RUN_AS_RANKS(3, ddp_ranks_options());
  auto group = gloo_group();
  for (const std::vector<int>& batches : {std::vector<int>{1, 3, 2}, std::vector<int>{3, 3, 0}}) {
    const Trained ddp = train_joined(group, Sharding::None, batches);
    for (const Sharding sharding : {Sharding::Optimizer, Sharding::Gradients}) {
      expect_like_ddp(train_joined(group, sharding, batches), ddp,
                      bound_against_ddp(sharding, group->size()),
                      std::string(sharding_name(sharding)) + " under Join, rank " +
                          std::to_string(group->rank()));
    }
  }
}

// Note [Counted memory]: bytes, not RSS. P = the trained parameters' float32 bytes.
TEST(ShardedDdpMultiprocess, EachRankHoldsItsShardOfTheStateAndStageTwoOfTheGradients) {
  TANDEM_RUN_AS_RANKS(3, ddp_ranks_options());
  auto group = gloo_group();
  const nn::SgdConfig config{.lr = 0.1f, .momentum = 0.9f};
  const Trained ddp = train_sharded(group, Sharding::None, config, 2, 1);
  const Trained stage1 = train_sharded(group, Sharding::Optimizer, config, 2, 1);
  const Trained stage2 = train_sharded(group, Sharding::Gradients, config, 2, 1);
  const int world = group->size();
  const size_t p = ddp.bytes.parameters;
  EXPECT_EQ(p, 914 * sizeof(float)) << "conv_bn_net's parameters";
  EXPECT_EQ(ddp.optimizer_bytes, p) << "plain SGD: momentum for every parameter";
  for (const Trained* zero : {&stage1, &stage2}) {
    // The momentum of this rank's parts alone: 1/world of the padded buckets.
    EXPECT_EQ(zero->optimizer_bytes, static_cast<size_t>(zero->shard_numel) * sizeof(float));
    EXPECT_EQ(zero->shard_numel * world, zero->padded_numel);
    EXPECT_LT(zero->padded_numel - 914, 3 * world) << "under world elements of padding a bucket";
    EXPECT_EQ(zero->bytes.parameters, static_cast<size_t>(zero->padded_numel) * sizeof(float));
  }
  EXPECT_EQ(ddp.bytes.gradients, 2 * p) << ".grad and the buckets";
  EXPECT_EQ(stage1.bytes.gradients, 2 * p) << "stage 1 keeps DDP's gradients";
  EXPECT_TRUE(stage1.grads_left);
  // Stage 2: the shards between steps, plus the buckets alive during a step (at most all of
  // them); no .grad survives the step.
  EXPECT_FALSE(stage2.grads_left) << "stage 2 drops .grad once it is in its bucket";
  const size_t shard_bytes = static_cast<size_t>(stage2.shard_numel) * sizeof(float);
  EXPECT_GT(stage2.bytes.gradients, shard_bytes);
  EXPECT_LE(stage2.bytes.gradients,
            shard_bytes + static_cast<size_t>(stage2.padded_numel) * sizeof(float));
}

TEST(ShardedDdpMultiprocess, RefusesWhatItCannotShardInOneLine) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group();
  for (const Sharding sharding : {Sharding::Optimizer, Sharding::Gradients}) {
    DdpOptions unused = sharded_options(sharding);
    unused.reducer.find_unused_parameters = true;
    EXPECT_NE(error_message([&] {
                DistributedDataParallel(conv_bn_net(7), group, unused);
              }).find("find_unused_parameters is not supported with sharding"),
              std::string::npos);
  }
  DdpOptions views = sharded_options(Sharding::Gradients);
  views.reducer.gradient_as_bucket_view = true;
  EXPECT_NE(error_message([&] {
              DistributedDataParallel(conv_bn_net(7), group, views);
            }).find("gradient_as_bucket_view"),
            std::string::npos);
  auto net = conv_bn_net(7);
  DistributedDataParallel plain(net, group);
  nn::Sgd sgd(net->parameters(), {});
  EXPECT_NE(error_message([&] { ShardedSgd(plain, sgd); }).find("built with sharding"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::parallel
