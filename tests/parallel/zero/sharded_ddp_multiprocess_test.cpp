// Sharded data parallel (ZeRO stages 1 and 2, parallel/zero/sharded_sgd.h) across real processes:
// the weights and momentum after a few steps against plain DDP's in the same ranks, the bytes each
// rank holds, and what is refused. Each body runs in every rank (TANDEM_RUN_AS_RANKS, or mpirun).
//
// The bound (Note [Sharded data parallel]): SGD is elementwise, so a rank stepping its part of a
// bucket gives each element the update plain SGD gives it from the same gradient. Stage 1's
// gradient is DDP's all-reduce itself, over the same buckets: its weights and momentum are plain
// DDP's bit for bit, as long as plain DDP keeps the buckets too (its rebuild after the first step,
// on by default, changes the order its all-reduce adds in at 3 ranks and more, so that stage 1
// then differs from it in the last bits: a test below). Stage 2's reduce-scatter may add the
// ranks' terms in another order than the all-reduce (a backend's choice), so each gradient
// element may differ by a few float32 roundings (≤ 2(W−1)·2⁻²⁴ of the sum of the terms'
// magnitudes), a difference that then flows through the following steps' forward and backward: over
// 3 steps of this small, well-conditioned network far below the 1e-5 of the largest value allowed
// (measured: bit for bit on Gloo at 3 ranks and MPI at 2, ~1e-7 of the largest value on Gloo at 4
// ranks); a wrong shard, a double step or a lost momentum is 1e-2 or more.
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
#include "tests/support/spawn_ranks.h"
#include "tests/support/tensor_compare.h"

namespace tandem::parallel {
namespace {

using testing::conv_bn_net;
using testing::ddp_ranks_options;
using testing::error_message;
using testing::gloo_group;
using testing::mpi_group;

constexpr int64_t kRows = 4;  // images per rank and micro-batch

// Three buckets of 106, 576 and 232 elements (conv_bn_net in reverse registration order), so the
// parts cut through parameters and, at 3 ranks, every bucket is padded. Plain DDP keeps them too
// unless told to rebuild them after the first step, as it does by default: Gloo's ring adds each
// element's terms in an order set by where the element falls in its bucket, so other buckets
// round differently at 3 ranks and more (Note [Bucket order on resume]).
DdpOptions options_for(Sharding sharding, bool rebuild_buckets = false) {
  return {.reducer = {.first_bucket_mb = 0.001,
                      .bucket_cap_mb = 0.002,
                      .rebuild_buckets = rebuild_buckets},
          .sharding = sharding};
}

struct Trained {
  std::vector<Tensor> weights;   ///< the module's parameters, in registration order
  std::vector<Tensor> momentum;  ///< the whole momentum on rank 0 (consolidated), else empty
  size_t optimizer_bytes = 0;
  ModelStateBytes bytes;
  int64_t shard_numel = 0;   ///< this rank's elements over every bucket (0 without sharding)
  int64_t padded_numel = 0;  ///< every bucket's elements, padding included
  bool grads_left = false;   ///< some parameter still holds a .grad after the last step
  std::vector<std::vector<size_t>> buckets;  ///< the parameters of each bucket, at the end
};

/// What the model runs with besides the optimizer.
struct Variant {
  nn::Precision precision = nn::Precision::Float32;
  bool sync_bn = false;
  GradCompression compression = GradCompression::None;  ///< the built-in hooks
  bool rebuild_buckets = false;  ///< plain DDP's default: buckets in the first step's arrival order
};

// `steps` steps of `micro` micro-batches each (all but the last under no_sync(), each mean loss
// scaled by 1/micro, as train_cifar accumulates).
Trained train(const std::shared_ptr<ProcessGroup>& group, Sharding sharding,
              const nn::SgdConfig& config, int steps, int micro, Variant variant = {}) {
  auto net = conv_bn_net(7);
  net->set_precision(variant.precision);
  if (variant.sync_bn) convert_sync_batchnorm(*net, group);
  DistributedDataParallel model(net, group, options_for(sharding, variant.rebuild_buckets));
  if (variant.compression != GradCompression::None) {
    model.register_comm_hook(make_comm_hook(variant.compression));
  }
  nn::Sgd sgd(net->parameters(), config);
  std::unique_ptr<ShardedSgd> sharded;
  if (sharding != Sharding::None) sharded = std::make_unique<ShardedSgd>(model, sgd);
  nn::Optimizer& optimizer = sharded ? static_cast<nn::Optimizer&>(*sharded) : sgd;
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    for (int m = 0; m < micro; ++m) {
      std::optional<DistributedDataParallel::NoSyncGuard> no_sync;
      if (m + 1 < micro) no_sync.emplace(model);
      const auto batch = testing::random_image_batch(
          kRows, 1000 + 100 * static_cast<uint64_t>(step) + 10 * static_cast<uint64_t>(m) +
                     static_cast<uint64_t>(group->rank()));
      mul(cross_entropy(model.forward(batch.images), batch.labels),
          1.0f / static_cast<float>(micro))
          .backward();
    }
    optimizer.step();
  }
  Trained out;
  for (const Tensor& p : net->parameters()) {
    out.weights.push_back(p.detach().clone());
    out.grads_left = out.grads_left || p.grad().defined();
  }
  out.optimizer_bytes = optimizer.state_bytes();
  out.bytes = model.model_state_bytes(out.optimizer_bytes);
  out.buckets = model.reducer().bucket_assignment();
  std::unique_ptr<nn::Sgd> whole = sharded ? sharded->consolidated(0) : nullptr;
  const nn::Sgd* full = sharded ? whole.get() : &sgd;
  if (group->rank() == 0) {
    for (const Tensor& buffer : full->momentum_buffers()) out.momentum.push_back(buffer);
  }
  if (model.flat_parameters() != nullptr) {
    out.shard_numel = model.flat_parameters()->layout().shard_numel();
    out.padded_numel = model.flat_parameters()->layout().padded_numel();
  }
  return out;
}

// Stage 1: bit for bit; stage 2: the bound above.
void expect_like_ddp(const Trained& actual, const Trained& expected, Sharding sharding,
                     const std::string& what) {
  const double relative = sharding == Sharding::Optimizer ? 0.0 : 1e-5;
  ASSERT_EQ(actual.weights.size(), expected.weights.size());
  for (size_t i = 0; i < expected.weights.size(); ++i) {
    testing::expect_close_to_reference(actual.weights[i], expected.weights[i],
                                       what + " weight " + std::to_string(i), relative);
  }
  ASSERT_EQ(actual.momentum.size(), expected.momentum.size()) << what;
  for (size_t i = 0; i < expected.momentum.size(); ++i) {
    ASSERT_EQ(actual.momentum[i].defined(), expected.momentum[i].defined()) << what << " " << i;
    if (!expected.momentum[i].defined()) continue;
    testing::expect_close_to_reference(actual.momentum[i], expected.momentum[i],
                                       what + " momentum " + std::to_string(i), relative);
  }
}

void expect_stages_like_ddp(const std::shared_ptr<ProcessGroup>& group) {
  struct Case {
    nn::SgdConfig config;
    int micro;
    std::string name;
  };
  const std::vector<Case> cases = {
      {{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f}, 1, "momentum + weight decay"},
      {{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f, .nesterov = true},
       2,
       "Nesterov, 2 micro-batches"},
      {{.lr = 0.05f, .weight_decay = 1e-3f, .no_decay_for_bn_and_bias = true},
       3,
       "no momentum, no decay for 1-D, 3 micro-batches"},
  };
  for (const Case& c : cases) {
    const Trained ddp = train(group, Sharding::None, c.config, 3, c.micro);
    for (const Sharding sharding : {Sharding::Optimizer, Sharding::Gradients}) {
      const Trained zero = train(group, sharding, c.config, 3, c.micro);
      expect_like_ddp(zero, ddp, sharding, std::string(sharding_name(sharding)) + ", " + c.name);
    }
  }
}

TEST(ShardedDdpMultiprocess, StagesOneAndTwoStepLikeDdpOnThreeRanks) {
  TANDEM_RUN_AS_RANKS(3, ddp_ranks_options());
  expect_stages_like_ddp(gloo_group());
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
  const Trained rebuilt = train(group, Sharding::None, config, 3, 1, {.rebuild_buckets = true});
  const Trained kept = train(group, Sharding::None, config, 3, 1);
  const Trained stage1 = train(group, Sharding::Optimizer, config, 3, 1);
  EXPECT_NE(rebuilt.buckets, stage1.buckets) << "the rebuild moved some parameter";
  EXPECT_EQ(kept.buckets, stage1.buckets);
  expect_like_ddp(stage1, kept, Sharding::Optimizer, "stage 1 against DDP's buckets kept");
  expect_like_ddp(stage1, rebuilt, Sharding::Gradients, "stage 1 against DDP's buckets rebuilt");
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
  for (const Variant variant :
       {Variant{.precision = nn::Precision::BFloat16}, Variant{.sync_bn = true}}) {
    const Trained ddp = train(group, Sharding::None, config, 2, 1, variant);
    for (const Sharding sharding : {Sharding::Optimizer, Sharding::Gradients}) {
      expect_like_ddp(
          train(group, sharding, config, 2, 1, variant), ddp, sharding,
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
    const Trained ddp = train(group, Sharding::None, config, 2, 1, variant);
    expect_like_ddp(train(group, Sharding::Gradients, config, 2, 1, variant), ddp,
                    Sharding::Gradients, grad_compression_name(compression));
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
  DistributedDataParallel model(conv_bn_net(7), group, options_for(Sharding::Gradients));
  model.register_comm_hook(std::make_shared<AllreduceOnly>());
  const auto batch = testing::random_image_batch(kRows, 5);
  const std::string message =
      error_message([&] { cross_entropy(model.forward(batch.images), batch.labels).backward(); });
  EXPECT_NE(message.find("'allreduce-only' has no reduce_scatter()"), std::string::npos) << message;
}

TEST(ShardedDdpMpiMultiprocess, StagesOneAndTwoStepLikeDdpOnTwoRanks) {
  TANDEM_RUN_UNDER_MPIRUN(2);
  expect_stages_like_ddp(mpi_group());
}

// Join with uneven inputs (Note [Sharded data parallel], Join): rank r trains batches[r] steps;
// a rank that has joined goes on stepping its part. Plain DDP under a Join (SgdJoinable
// equalising the momentum at the end) is the reference. Returns the weights and, on rank 0, the
// whole momentum.
Trained train_joined(const std::shared_ptr<ProcessGroup>& group, Sharding sharding,
                     const std::vector<int>& batches) {
  auto net = conv_bn_net(7);
  DistributedDataParallel model(net, group, options_for(sharding));
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
    const auto batch = testing::random_image_batch(
        kRows, 2000 + 100 * static_cast<uint64_t>(step) + static_cast<uint64_t>(group->rank()));
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
      expect_like_ddp(train_joined(group, sharding, batches), ddp, sharding,
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
  const Trained ddp = train(group, Sharding::None, config, 2, 1);
  const Trained stage1 = train(group, Sharding::Optimizer, config, 2, 1);
  const Trained stage2 = train(group, Sharding::Gradients, config, 2, 1);
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
    DdpOptions unused = options_for(sharding);
    unused.reducer.find_unused_parameters = true;
    EXPECT_NE(error_message([&] {
                DistributedDataParallel(conv_bn_net(7), group, unused);
              }).find("find_unused_parameters is not supported with sharding"),
              std::string::npos);
  }
  DdpOptions views = options_for(Sharding::Gradients);
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
