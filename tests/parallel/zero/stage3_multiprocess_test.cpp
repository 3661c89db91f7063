// ZeRO stage 3 (Sharding::Parameters, parallel/zero/sharded_units.h) across real processes: the
// weights and momentum against plain DDP's (the bound: tests/support/sharded_training.h; two
// ranks bit for bit), the schedule of gathers, prefetches and frees as it happened, the bytes a
// rank holds, checkpoints across stages and world sizes, and what is refused. Each body runs in
// every rank (TANDEM_RUN_AS_RANKS).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "engine/autograd/grad_mode.h"
#include "engine/ops/loss.h"
#include "nn/sgd.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/join.h"
#include "parallel/zero/sharded_sgd.h"
#include "tests/support/ddp_fixtures.h"
#include "tests/support/error_message.h"
#include "tests/support/image_batch.h"
#include "tests/support/sharded_training.h"
#include "tests/support/spawn_ranks.h"

namespace tandem::parallel {
namespace {

using testing::conv_bn_net;
using testing::ddp_ranks_options;
using testing::error_message;
using testing::expect_like_ddp;
using testing::expect_stages_like_ddp;
using testing::gloo_group;
using testing::kShardedRows;
using testing::sharded_options;
using testing::train_sharded;
using testing::Trained;
using testing::Variant;

const nn::SgdConfig kMomentum{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f};

TEST(ShardedParametersMultiprocess, StageThreeStepsLikeDdpBitForBitOnTwoRanks) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  expect_stages_like_ddp(gloo_group(), {Sharding::Parameters});
}

TEST(ShardedParametersMultiprocess, StageThreeStepsLikeDdpOnThreeRanks) {
  TANDEM_RUN_AS_RANKS(3, ddp_ranks_options());
  expect_stages_like_ddp(gloo_group(), {Sharding::Parameters});
}

// bf16 compute gathers the same float32 parameters; SyncBatchNorm's collectives in forward and
// backward take their turns among the units' all-gathers and reduce-scatters, in the same order
// on every rank.
TEST(ShardedParametersMultiprocess, StageThreeStepsLikeDdpInBf16AndWithSyncBatchNormOnFourRanks) {
  TANDEM_RUN_AS_RANKS(4, ddp_ranks_options());
  auto group = gloo_group();
  expect_stages_like_ddp(group, {Sharding::Parameters});
  for (const Variant& variant :
       {Variant{.precision = nn::Precision::BFloat16}, Variant{.sync_bn = true}}) {
    expect_like_ddp(train_sharded(group, Sharding::Parameters, kMomentum, 2, 1, variant),
                    train_sharded(group, Sharding::None, kMomentum, 2, 1, variant),
                    testing::kReductionOrderBound, variant.sync_bn ? "SyncBatchNorm" : "bf16");
  }
}

UnitEvent launched(size_t u) {
  return {UnitEvent::Kind::GatherLaunched, u};
}
UnitEvent waited(size_t u) {
  return {UnitEvent::Kind::GatherWaited, u};
}
UnitEvent forward(size_t u) {
  return {UnitEvent::Kind::ForwardBegins, u};
}
UnitEvent backward(size_t u) {
  return {UnitEvent::Kind::BackwardBegins, u};
}
UnitEvent freed(size_t u) {
  return {UnitEvent::Kind::Freed, u};
}

// Note [Stage 3 units]: the next unit's all-gather is launched before the current unit's forward
// (or backward) begins and waited for only when the next unit begins, so it is in flight while
// the current unit computes; each unit is freed once the next has begun, the last one after
// backward. The events are recorded as they happen, in order: no timing involved.
TEST(ShardedParametersMultiprocess, TheNextUnitsGatherIsInFlightWhileAUnitComputes) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group();
  auto net = conv_bn_net(7);
  DistributedDataParallel model(net, group, sharded_options(Sharding::Parameters));
  ShardedUnits& units = *model.sharded_units();
  ASSERT_EQ(units.size(), 3u);
  const auto batch = testing::random_image_batch(kShardedRows, 11);
  units.record_events(true);
  cross_entropy(model.forward(batch.images), batch.labels).backward();
  EXPECT_EQ(units.events(),
            (std::vector<UnitEvent>{
                launched(0), waited(0),   launched(1), forward(0),   // unit 1 prefetched
                freed(0),    waited(1),   launched(2), forward(1),   // unit 2 prefetched
                freed(1),    waited(2),   forward(2),                // the last stays for backward
                launched(1), backward(2),                            // unit 1 prefetched
                freed(2),    waited(1),   launched(0), backward(1),  // unit 0 prefetched
                freed(1),    waited(0),   backward(0),               //
                freed(0)}));                                         // the end of backward
  units.record_events(true);
  {
    const NoGradGuard no_grad;
    model.forward(batch.images);
  }
  EXPECT_EQ(units.events(), (std::vector<UnitEvent>{launched(0), waited(0), launched(1), forward(0),
                                                    freed(0), waited(1), launched(2), forward(1),
                                                    freed(1), waited(2), forward(2), freed(2)}))
      << "without grad the last unit is freed at the end of forward";
}

// Note [Counted memory]: a rank keeps its parts of the parameters, gradients and momentum, and
// gathers at most two units at once (the running one and the prefetched one).
TEST(ShardedParametersMultiprocess, EachRankHoldsItsPartsAndAtMostTwoUnitsGathered) {
  TANDEM_RUN_AS_RANKS(4, ddp_ranks_options());
  auto group = gloo_group();
  const Trained stage3 = train_sharded(group, Sharding::Parameters, kMomentum, 2, 1);
  // Units of 232, 592 and 90 elements, padded to 232, 592 and 92 over 4 ranks: the most
  // gathered at once is the first two (824 elements), in forward and in backward.
  EXPECT_EQ(stage3.padded_numel, 232 + 592 + 92);
  EXPECT_EQ(stage3.shard_numel, (232 + 592 + 92) / 4);
  const size_t shard_bytes = static_cast<size_t>(stage3.shard_numel) * sizeof(float);
  EXPECT_EQ(stage3.optimizer_bytes, shard_bytes);
  EXPECT_EQ(stage3.bytes.parameters, shard_bytes + (232 + 592) * sizeof(float));
  EXPECT_FALSE(stage3.grads_left);
  EXPECT_GT(stage3.bytes.gradients, shard_bytes);
  EXPECT_LE(stage3.bytes.gradients,
            shard_bytes + static_cast<size_t>(stage3.padded_numel) * sizeof(float));
  EXPECT_EQ(stage3.buckets, (std::vector<std::vector<size_t>>{{6, 7}, {3, 4, 5}, {0, 1, 2}}))
      << "a bucket per unit, the last unit's first";
}

// Between uses a rank holds its part only: reading a parameter then is refused, and reads
// under gather_parameters().
TEST(ShardedParametersMultiprocess, ParametersAreReadableOnlyWhileGathered) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group();
  auto net = conv_bn_net(7);
  const std::vector<float> initial = net->parameters().front().to_vector<float>();
  DistributedDataParallel model(net, group, sharded_options(Sharding::Parameters));
  const Tensor weight = net->parameters().front();
  EXPECT_NE(error_message([&] { weight.to_vector<float>(); }).find("memory was released"),
            std::string::npos);
  {
    const GatheredParameters whole = model.gather_parameters();
    EXPECT_EQ(weight.to_vector<float>(), initial);
  }
  EXPECT_NE(error_message([&] { weight.to_vector<float>(); }).find("memory was released"),
            std::string::npos);
}

// A folder every rank of this job names alike (MASTER_PORT is the job's own), made by rank 0.
std::filesystem::path job_folder(ProcessGroup& world) {
  const char* port = std::getenv("MASTER_PORT");
  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / ("tandem_stage3_" + std::string(port ? port : "0"));
  if (world.rank() == 0) std::filesystem::create_directories(folder);
  world.barrier()->wait();
  return folder;
}

// Note [One checkpoint format]: stage 3 saves what plain DDP saves (its weights and momentum bit
// for bit at 2 ranks), and a run at any stage and world size loads it, whose own checkpoint,
// saved at once, is the same again.
TEST(ShardedParametersMultiprocess, ACheckpointRoundTripsAcrossStagesAndWorldSizes) {
  TANDEM_RUN_AS_RANKS(4, ddp_ranks_options());
  auto world = gloo_group();
  auto pair = world->new_group({0, 1});
  auto three = world->new_group({0, 1, 2});
  const std::filesystem::path folder = job_folder(*world);
  const std::string saved = (folder / "stage3").string(), ddp = (folder / "ddp").string();
  if (pair->rank() >= 0) {
    train_sharded(pair, Sharding::Parameters, kMomentum, 2, 1, {.save_to = saved});
    train_sharded(pair, Sharding::None, kMomentum, 2, 1, {.save_to = ddp});
  }
  world->barrier()->wait();
  const Trained stage3 = testing::read_checkpoint(saved);
  expect_like_ddp(stage3, testing::read_checkpoint(ddp), 0.0, "stage 3's checkpoint");
  struct Resumed {
    std::shared_ptr<ProcessGroup> group;
    Sharding sharding;
  };
  for (const Resumed& resumed :
       {Resumed{world, Sharding::Parameters}, Resumed{three, Sharding::Parameters},
        Resumed{three, Sharding::Optimizer}, Resumed{world, Sharding::None}}) {
    const std::string name = std::string(sharding_name(resumed.sharding)) + " at " +
                             std::to_string(resumed.group->size()) + " ranks";
    const std::string again = (folder / name).string();
    if (resumed.group->rank() >= 0) {
      train_sharded(resumed.group, resumed.sharding, kMomentum, 0, 1,
                    {.load_from = saved, .save_to = again});
    }
    world->barrier()->wait();
    expect_like_ddp(testing::read_checkpoint(again), stage3, 0.0, name);
  }
  world->barrier()->wait();
  if (world->rank() == 0) std::filesystem::remove_all(folder);
}

TEST(ShardedParametersMultiprocess, RefusesWhatItCannotDoInOneLine) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group();
  const auto refusal = [&](DdpOptions options) {
    return error_message([&] { DistributedDataParallel(conv_bn_net(7), group, options); });
  };
  DdpOptions views = sharded_options(Sharding::Parameters);
  views.reducer.gradient_as_bucket_view = true;
  EXPECT_NE(refusal(views).find("gradient_as_bucket_view has no meaning"), std::string::npos);
  DdpOptions unused = sharded_options(Sharding::Parameters);
  unused.reducer.find_unused_parameters = true;
  EXPECT_NE(refusal(unused).find("find_unused_parameters is not supported"), std::string::npos);
  DdpOptions typo = sharded_options(Sharding::Parameters);
  typo.units = {{"0"}, {"11"}};
  EXPECT_NE(refusal(typo).find("[ZeRO] no module '11' in the model"), std::string::npos);
  DdpOptions partial = sharded_options(Sharding::Parameters);
  partial.units = {{"0", "1"}, {"3", "4"}};
  EXPECT_NE(refusal(partial).find("[ZeRO] parameter 8.weight is in no unit"), std::string::npos);
  DdpOptions twice = sharded_options(Sharding::Parameters);
  twice.units = {{"0", "1"}, {"1", "3", "4", "8"}};
  EXPECT_NE(refusal(twice).find("[ZeRO] parameter 1.weight is in two units"), std::string::npos);

  auto net = conv_bn_net(7);
  DistributedDataParallel model(net, group, sharded_options(Sharding::Parameters));
  nn::Sgd sgd(net->parameters(), kMomentum);
  ShardedSgd optimizer(model, sgd);
  EXPECT_NE(error_message([&] {
              Join join(std::vector<std::reference_wrapper<Joinable>>{model, optimizer});
            }).find("ZeRO stage 3 cannot join"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::parallel
