// DistributedDataParallel across real processes (Gloo over loopback): every test body runs in
// each rank (TANDEM_RUN_AS_RANKS) and compares with a single process computing the same global
// batch locally.
#include <gtest/gtest.h>

#include <csignal>
#include <functional>
#include <optional>

#include "engine/ops/concat.h"
#include "nn/batch_norm2d.h"
#include "nn/conv2d.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/resnet.h"
#include "nn/sgd.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/sync_batch_norm.h"
#include "tests/support/ddp_fixtures.h"
#include "tests/support/error_message.h"
#include "tests/support/host_reads.h"
#include "tests/support/image_batch.h"
#include "tests/support/mpirun_ranks.h"
#include "tests/support/spawn_ranks.h"
#include "tests/support/split_compare.h"

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;
using testing::error_message;
using testing::expect_close_to_unsplit;

using testing::conv_bn_net;
using testing::small_net;
using testing::small_net_batch;

using testing::ddp_ranks_options;
using testing::gloo_group;
using testing::mpi_group;

using Batch = testing::ImageBatch;

Batch global_batch(int64_t n) {
  return testing::random_image_batch(n, 11, 3, 1);
}

// Note: batch-norm in eval mode, so every rank normalises with the same statistics and DDP's
// averaged gradient is the single-process one up to rounding.
// `format`: of the DDP model and its batches (the reference stays NCHW); `bucket_views`:
// gradient_as_bucket_view, whose views then take the parameters' format.
void expect_resnet20_matches_one_process(const std::shared_ptr<ProcessGroup>& group,
                                         int64_t global_rows,
                                         MemoryFormat format = MemoryFormat::Contiguous,
                                         bool bucket_views = false,
                                         nn::Precision precision = nn::Precision::Float32) {
  const int64_t rows = global_rows / group->size();
  const Batch batch = global_batch(global_rows);

  Generator reference_init(7);
  auto reference = nn::make_resnet("resnet20", reference_init);
  reference->set_precision(precision);
  reference->eval();
  cross_entropy(reference->forward(batch.images), batch.labels).backward();

  // Other ranks start from other weights: DDP's constructor must broadcast rank 0's.
  Generator init(7 + static_cast<uint64_t>(group->rank()));
  DdpOptions options;
  options.reducer.first_bucket_mb = 0.25;  // several buckets
  options.reducer.bucket_cap_mb = 0.25;
  options.reducer.gradient_as_bucket_view = bucket_views;
  auto network = nn::make_resnet("resnet20", init);
  network->to(format);
  network->set_precision(precision);
  DistributedDataParallel model(network, group, options);
  model.eval();
  const int64_t start = group->rank() * rows;
  cross_entropy(model.forward(batch.images.slice(start, start + rows).contiguous(format)),
                batch.labels.slice(start, start + rows))
      .backward();
  EXPECT_GT(model.reducer().bucket_assignment().size(), 2u);

  const auto expected = reference->named_parameters();
  const auto actual = model.module().named_parameters();
  for (size_t i = 0; i < expected.size(); ++i) {
    expect_close_to_unsplit(actual[i].second.grad(), expected[i].second.grad(),
                            expected[i].first + ".grad", precision);
    EXPECT_EQ(actual[i].second.grad().memory_format(), actual[i].second.memory_format())
        << expected[i].first;
    EXPECT_EQ(actual[i].second.grad().dtype(), DType::Float32) << "reduced as float32";
  }
  const nn::SgdConfig sgd{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f};
  nn::Sgd(reference->parameters(), sgd).step();
  nn::Sgd(model.parameters(), sgd).step();
  for (size_t i = 0; i < expected.size(); ++i) {
    expect_close_to_unsplit(actual[i].second, expected[i].second,
                            expected[i].first + " after a step", precision);
  }
}

TEST(DdpMultiprocess, ResNet20OverTwoRanksMatchesOneProcess) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  expect_resnet20_matches_one_process(gloo_group(), 8);
}

TEST(DdpMultiprocess, ChannelsLastOverTwoRanksMatchesOneNchwProcess) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  expect_resnet20_matches_one_process(gloo_group(), 8, MemoryFormat::ChannelsLast);
  expect_resnet20_matches_one_process(gloo_group(), 8, MemoryFormat::ChannelsLast,
                                      /*bucket_views=*/true);
}

TEST(DdpMultiprocess, Bf16OverTwoRanksMatchesOneBf16Process) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  expect_resnet20_matches_one_process(gloo_group(), 8, MemoryFormat::ChannelsLast, false,
                                      nn::Precision::BFloat16);
  expect_resnet20_matches_one_process(gloo_group(), 8, MemoryFormat::Contiguous, true,
                                      nn::Precision::BFloat16);
}

TEST(DdpMultiprocess, ResNet20OverFourRanksMatchesOneProcess) {
  TANDEM_RUN_AS_RANKS(4, ddp_ranks_options());
  expect_resnet20_matches_one_process(gloo_group(), 8);
}

// The Reducer's instrumentation of the last of three steps on `group`.
ReducerStepStats overlapped_step(const std::shared_ptr<ProcessGroup>& group) {
  Generator init(1);
  DdpOptions options;
  options.reducer.first_bucket_mb = 0.05;
  options.reducer.bucket_cap_mb = 0.1;
  DistributedDataParallel model(nn::make_resnet("resnet20", init), group, options);
  const Batch batch = global_batch(16);
  for (int step = 0; step < 3; ++step) {  // the last two with the rebuilt buckets
    model.zero_grad();
    cross_entropy(model.forward(batch.images), batch.labels).backward();
  }
  return model.reducer().timer().last_step();
}

TEST(DdpMultiprocess, AllReducesStartWhileBackwardRuns) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  const ReducerStepStats stats = overlapped_step(gloo_group());
  ASSERT_GT(stats.buckets.size(), 3u);
  // The first bucket (the classifier's gradients) is ready long before backward reaches conv1.
  EXPECT_LT(stats.buckets.front().started_ms, 0.0);
  EXPECT_GT(stats.hidden_fraction, 0.0);
  for (const BucketTiming& bucket : stats.buckets) EXPECT_GE(bucket.ended_ms, bucket.started_ms);
}

// DDP over MPI (mpirun starts the ranks): the same comparisons with one process, and the
// overlap, which needs the MPI group's progress thread (Note [MPI progress]): without it the
// first bucket would only finish when the end of backward waits for it.
TEST(DdpMpiMultiprocess, ResNet20OverTwoRanksMatchesOneProcessInFp32AndBf16) {
  TANDEM_RUN_UNDER_MPIRUN(2);
  expect_resnet20_matches_one_process(mpi_group(), 8);
  expect_resnet20_matches_one_process(mpi_group(), 8, MemoryFormat::ChannelsLast, true,
                                      nn::Precision::BFloat16);
}

TEST(DdpMpiMultiprocess, ResNet20OverThreeRanksMatchesOneProcess) {
  TANDEM_RUN_UNDER_MPIRUN(3);
  expect_resnet20_matches_one_process(mpi_group(), 12);
}

// Which rank runs ahead varies on shared cores, and the one ahead waits for the other in each
// bucket; but the later rank finds its peer's half of a bucket posted already, so its own
// all-reduces finish during its backward, where the engine's thread drives them.
TEST(DdpMpiMultiprocess, AllReducesFinishWhileBackwardRuns) {
  TANDEM_RUN_UNDER_MPIRUN(2);
  auto group = mpi_group();
  const ReducerStepStats stats = overlapped_step(group);
  ASSERT_GT(stats.buckets.size(), 3u);
  EXPECT_GT(stats.hidden_fraction, 0.0);
  bool finished_early = false;
  for (const BucketTiming& bucket : stats.buckets) finished_early |= bucket.ended_ms < 0.0;
  Tensor any_rank = full({1}, finished_early ? 1.0 : 0.0);
  group->allreduce({any_rank}, ReduceOp::Max)->wait();
  EXPECT_EQ(any_rank.item(), 1.0) << "no bucket finished before the end of backward on any rank";
}

TEST(DdpMultiprocess, RanksThatFreezeDifferentParametersAreRejected) {
  // Review D5: the model check now compares requires_grad, the list DDP actually reduces.
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group(20s);
  auto net = small_net(3);
  if (group->rank() == 1) net->parameters().front().set_requires_grad(false);
  const std::string message = error_message([&] { DistributedDataParallel model(net, group); });
  EXPECT_NE(message.find("[DDP] every rank must hold the same model, but parameter 0 (0.weight) "
                         "is float32 [5, 6] on rank 0 and frozen float32 [5, 6] on rank 1"),
            std::string::npos)
      << message;
}

// SyncBatchNorm (Note [Synchronised batch norm]): DDP over 2 ranks of 8 images, batch norm in
// training mode, equals one process of 16 images: outputs, gradients, running statistics.
// Without it each rank normalises with its own images, and the outputs differ (checked too).
// In bf16 (Note [Mixed precision]) SyncBatchNorm computes in float32 between the bfloat16
// convolutions, as one process's bfloat16 batch norm does inside its kernel.
void expect_sync_batchnorm_matches_one_process(MemoryFormat format, bool sync,
                                               nn::Precision precision = nn::Precision::Float32) {
  auto group = gloo_group();
  const int64_t global_rows = 16, rows = global_rows / group->size();
  const auto batch = testing::random_image_batch(global_rows, 21);
  auto reference = conv_bn_net(7);
  reference->set_precision(precision);
  const Tensor reference_logits = reference->forward(batch.images);
  cross_entropy(reference_logits, batch.labels).backward();

  auto network = conv_bn_net(7);
  network->to(format);
  network->set_precision(precision);
  if (sync) {
    EXPECT_EQ(convert_sync_batchnorm(*network, group), 2);
  }
  DistributedDataParallel model(network, group);
  const int64_t start = group->rank() * rows;
  const Tensor logits = model.forward(batch.images.slice(start, start + rows).contiguous(format));
  const Tensor expected_logits = reference_logits.slice(start, start + rows).detach();
  if (!sync) {
    double worst = 0;
    const std::vector<float> a = logits.to_vector<float>(), e = expected_logits.to_vector<float>();
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - e[i]));
    EXPECT_GT(worst, 1e-3) << "per-rank statistics should differ from the global batch's";
    return;
  }
  cross_entropy(logits, batch.labels.slice(start, start + rows)).backward();
  expect_close_to_unsplit(logits, expected_logits, "logits", precision);
  const auto expected = reference->named_parameters();
  const auto actual = model.module().named_parameters();
  for (size_t i = 0; i < expected.size(); ++i) {
    expect_close_to_unsplit(actual[i].second.grad(), expected[i].second.grad(),
                            expected[i].first + ".grad", precision);
  }
  const auto expected_buffers = reference->named_buffers();
  const auto actual_buffers = model.module().named_buffers();
  for (size_t i = 0; i < expected_buffers.size(); ++i) {
    if (expected_buffers[i].second.dtype() != DType::Float32) continue;
    expect_close_to_unsplit(actual_buffers[i].second, expected_buffers[i].second,
                            expected_buffers[i].first, precision);
  }
}

TEST(DdpMultiprocess, SyncBatchNormOverTwoRanksMatchesOneProcess) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  expect_sync_batchnorm_matches_one_process(MemoryFormat::Contiguous, true);
  expect_sync_batchnorm_matches_one_process(MemoryFormat::ChannelsLast, true);
  expect_sync_batchnorm_matches_one_process(MemoryFormat::Contiguous, false);
}

TEST(DdpMultiprocess, SyncBatchNormInBf16OverTwoRanksMatchesOneBf16Process) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  expect_sync_batchnorm_matches_one_process(MemoryFormat::ChannelsLast, true,
                                            nn::Precision::BFloat16);
  expect_sync_batchnorm_matches_one_process(MemoryFormat::Contiguous, true,
                                            nn::Precision::BFloat16);
}

// Note [Counting host reads]: once the second step has rebuilt the buckets in the order the
// first step's gradients arrived (reading that order once, as PyTorch's DDP does), a step reads
// nothing on the host: the buffer broadcast, the bucket all-reduces and synchronised batch
// norm's collectives are all stream-ordered on a GPU.
TEST(DdpMultiprocess, TrainingStepsReadNothingOnTheHostOnceBucketsAreRebuilt) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group();
  for (const bool sync_bn : {false, true}) {
    Generator init(7);
    auto network = nn::make_resnet("resnet20", init);
    if (sync_bn) {
      EXPECT_EQ(convert_sync_batchnorm(*network, group), 21);
    }
    DistributedDataParallel model(network, group);
    const auto batch = testing::random_image_batch(4, 21 + static_cast<uint64_t>(group->rank()));
    testing::train_steps(model, batch, 2);
    EXPECT_EQ(testing::host_reads_during([&] { testing::train_steps(model, batch, 2); }), 0)
        << (sync_bn ? "with SyncBatchNorm" : "with batch norm");
  }
}

TEST(DdpMultiprocess, DifferentModelsAreRejectedOnEveryRank) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group(20s);
  const int64_t width = group->rank() == 0 ? 4 : 5;
  auto net = std::make_shared<nn::Linear>(nn::LinearConfig{8, width});
  const std::string message = error_message([&] { DistributedDataParallel model(net, group); });
  EXPECT_NE(message.find("[DDP] every rank must hold the same model, but parameter 0 (weight) is "
                         "float32 [4, 8] on rank 0 and float32 [5, 8] on rank 1"),
            std::string::npos)
      << message;
}

// Review 2026-11-26 N1: buffers travel only in the first forward after a synchronised training
// forward (PyTorch's require_forward_param_sync), so evaluating uneven shards through the wrapper
// under no_grad finishes. Before, every forward broadcast: rank 1's third forward waited for a
// broadcast rank 0 never ran, and both failed at the timeout.
TEST(DdpMultiprocess, UnevenEvalForwardsUnderNoGradFinish) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group(8s);  // a regression fails in seconds, not at the 300 s default
  DistributedDataParallel model(conv_bn_net(5), group);
  const auto batch = testing::random_image_batch(4, 400 + static_cast<uint64_t>(group->rank()));
  sum(model.forward(batch.images)).backward();  // each rank's statistics move its own way
  model.eval();
  NoGradGuard no_grad;
  for (int e = 0; e < (group->rank() == 0 ? 2 : 3); ++e) model.forward(batch.images);
  Tensor one = ones({1});
  ASSERT_NO_THROW(group->allreduce({one}, ReduceOp::Sum)->synchronize());
  EXPECT_EQ(one.item(), 2.0f);

  // The first eval forward still brought rank 0's statistics.
  std::vector<Tensor> mine, from_rank0;
  for (const auto& [name, buffer] : model.module().named_buffers()) {
    mine.push_back(buffer);
    from_rank0.push_back(buffer.clone());
  }
  broadcast_coalesced(*group, from_rank0, 0);
  for (size_t i = 0; i < mine.size(); ++i) {
    EXPECT_EQ(mine[i].to(DType::Float32).to_vector<float>(),
              from_rank0[i].to(DType::Float32).to_vector<float>())
        << "buffer " << i << " on rank " << group->rank();
  }
}

// Which forwards broadcast buffers, as PyTorch 1.13: the first forward after a synchronised
// training forward (and the very first), no other. Batch norm in eval mode leaves its statistics
// alone, so a mark that rank 1 writes into them survives exactly the forwards that broadcast
// nothing.
TEST(DdpMultiprocess, OnlyTheFirstForwardAfterASynchronisedOneBroadcastsBuffers) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group(8s);
  DistributedDataParallel model(conv_bn_net(5), group);
  model.eval();
  Tensor running_mean = model.module().named_buffers().front().second;
  const auto batch = testing::random_image_batch(4, 600);
  // Marks rank 1's statistics, runs one forward (and its backward in grad mode), and says
  // whether the mark survived.
  auto mark_survives = [&](bool sync, bool grad) {
    if (group->rank() == 1) running_mean.fill_(7.0);
    std::optional<DistributedDataParallel::NoSyncGuard> no_sync;
    if (!sync) no_sync.emplace(model);
    if (grad) {
      sum(model.forward(batch.images)).backward();
    } else {
      NoGradGuard no_grad;
      model.forward(batch.images);
    }
    return running_mean.to_vector<float>().front() == 7.0f;
  };
  const bool rank1 = group->rank() == 1;
  EXPECT_FALSE(mark_survives(/*sync=*/true, /*grad=*/true)) << "the first forward broadcasts";
  EXPECT_FALSE(mark_survives(false, true)) << "the first no_sync forward after a synced one";
  EXPECT_EQ(mark_survives(false, true), rank1) << "a second no_sync forward";
  EXPECT_EQ(mark_survives(true, true), rank1) << "the synced forward after no_sync ones";
  EXPECT_FALSE(mark_survives(true, false)) << "the first no_grad forward after a synced one";
  EXPECT_EQ(mark_survives(true, false), rank1) << "a second no_grad forward";
}

TEST(DdpMultiprocess, ADeadRankMakesTheOthersFailInsteadOfHanging) {
  if (!testing::launched_as_rank()) {
    testing::SpawnOptions options = ddp_ranks_options();
    options.stop_on_failure = false;  // let rank 0 find out by itself
    const testing::SpawnResult result =
        testing::spawn_ranks(2, testing::current_test_filter(), options);
    EXPECT_FALSE(result.timed_out) << result.output;
    EXPECT_EQ(result.signals.at(1), SIGKILL) << result.output;
    EXPECT_EQ(result.exit_codes.at(0), 0) << result.output;  // it saw the error it expected
    return;
  }
  auto group = gloo_group(5s);
  DistributedDataParallel model(small_net(1), group);
  if (group->rank() == 1) std::raise(SIGKILL);
  const std::string message =
      error_message([&] { sum(model.forward(small_net_batch(0, 0))).backward(); });
  EXPECT_NE(message.find("[DDP] all-reduce of gradient bucket 0 failed"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace tandem::parallel
