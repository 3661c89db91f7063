// Communication hooks (parallel/comm_hook.h) and then() (parallel/comm/process_group.h): the plain
// all-reduce, fp16 and bf16 compression against exact gradients with the error bound Note
// [Gradient compression] derives, training with compression against training without, and a
// user-written hook.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "nn/sgd.h"
#include "parallel/comm_hook.h"
#include "parallel/distributed_data_parallel.h"
#include "tests/support/ddp_fixtures.h"
#include "tests/support/error_message.h"
#include "tests/support/image_batch.h"

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;
using testing::ddp_ranks_options;
using testing::error_message;
using testing::gloo_group;

TEST(ContinuedWork, RunsItsContinuationOnceAfterTheWork) {
  auto work = std::make_shared<Work>("test work", 1s);
  int runs = 0;
  auto continued = then(work, [&] { ++runs; });
  EXPECT_FALSE(continued->completed());
  work->mark_started();
  work->mark_completed();
  EXPECT_TRUE(continued->completed());
  continued->wait();
  continued->synchronize();
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(continued->started_at(), work->started_at());
  EXPECT_EQ(continued->ended_at(), work->ended_at());
}

TEST(ContinuedWork, AFailedWorkThrowsAndSkipsTheContinuation) {
  auto work = std::make_shared<Work>("test work", 1s);
  int runs = 0;
  auto continued = then(work, [&] { ++runs; });
  work->mark_completed(std::make_exception_ptr(Error("[gloo] peer died")));
  EXPECT_TRUE(continued->failed());
  EXPECT_NE(error_message([&] { continued->wait(); }).find("peer died"), std::string::npos);
  EXPECT_EQ(runs, 0);
}

TEST(CommHook, CompressionNames) {
  EXPECT_EQ(parse_grad_compression("bf16"), GradCompression::BFloat16);
  EXPECT_EQ(parse_grad_compression("float16"), GradCompression::Float16);
  EXPECT_EQ(parse_grad_compression("none"), GradCompression::None);
  EXPECT_NE(error_message([] { parse_grad_compression("int8"); }).find("none, fp16 or bf16"),
            std::string::npos);
  EXPECT_EQ(make_comm_hook(GradCompression::BFloat16)->payload_bytes(10), 20u);
  EXPECT_EQ(make_comm_hook(GradCompression::None)->payload_bytes(10), 40u);
}

// Per rank r of 2, the gradient of its half of the batch; DDP's average is Σ_r g_r / 2.
std::vector<std::vector<float>> local_gradients(int rank, const testing::ImageBatch& batch) {
  auto net = testing::conv_bn_net(9);
  net->eval();
  const int64_t rows = batch.images.size(0) / 2;
  cross_entropy(net->forward(batch.images.slice(rank * rows, (rank + 1) * rows)),
                batch.labels.slice(rank * rows, (rank + 1) * rows))
      .backward();
  std::vector<std::vector<float>> out;
  for (const Tensor& p : net->parameters()) out.push_back(p.grad().to_vector<float>());
  return out;
}

// Note [Gradient compression]: each rank's scaled gradient a_r is rounded once, their sum once,
// so |compressed − exact| ≤ 2u(1+u)·Σ|a_r| (u: the format's unit roundoff), plus, for fp16,
// twice half the subnormal spacing.
void expect_compression_within_bound(GradCompression compression, double unit_roundoff,
                                     double absolute) {
  auto group = gloo_group();
  const auto batch = testing::random_image_batch(8, 31);
  DdpOptions options;
  options.reducer.first_bucket_mb = 0.001;  // several buckets
  options.reducer.bucket_cap_mb = 0.002;
  DistributedDataParallel model(testing::conv_bn_net(9), group, options);
  model.register_comm_hook(make_comm_hook(compression));
  model.eval();
  const int64_t rows = 4, start = group->rank() * rows;
  cross_entropy(model.forward(batch.images.slice(start, start + rows)),
                batch.labels.slice(start, start + rows))
      .backward();

  const auto g0 = local_gradients(0, batch), g1 = local_gradients(1, batch);
  const auto parameters = model.module().parameters();
  int64_t inexact = 0, numel = 0;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const std::vector<float> compressed = parameters[i].grad().to_vector<float>();
    for (size_t j = 0; j < compressed.size(); ++j) {
      const double a0 = g0[i][j] * 0.5, a1 = g1[i][j] * 0.5, exact = a0 + a1;
      const double bound =
          2 * unit_roundoff * (1 + unit_roundoff) * (std::abs(a0) + std::abs(a1)) + absolute +
          1e-6 * std::abs(exact);  // float32 rounding of the local gradients themselves
      ASSERT_LE(std::abs(compressed[j] - exact), bound)
          << grad_compression_name(compression) << ", parameter " << i << "[" << j << "]";
      inexact += compressed[j] != static_cast<float>(exact) ? 1 : 0;
    }
    numel += parameters[i].numel();
  }
  EXPECT_GT(inexact, numel / 10) << "compression left the gradients exact: did it run?";
  EXPECT_EQ(model.reducer().timer().last_step().payload_bytes, static_cast<size_t>(numel) * 2);
}

TEST(CommHookMultiprocess, CompressedGradientsStayWithinTheirErrorBound) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  expect_compression_within_bound(GradCompression::BFloat16, std::ldexp(1.0, -8), 0);
  expect_compression_within_bound(GradCompression::Float16, std::ldexp(1.0, -11),
                                  std::ldexp(1.0, -24));
}

// A three-class problem whose labels come from a fixed linear map. Returns the trained model's
// loss on 2,048 held-out points: a fixed set, so the comparison is not at the mercy of the last
// mini-batches' noise.
double held_out_loss_after_training(const std::shared_ptr<ProcessGroup>& group,
                                    GradCompression compression) {
  DistributedDataParallel model(testing::small_net(4), group);
  model.register_comm_hook(make_comm_hook(compression));
  nn::Sgd optimizer(model.parameters(), {.lr = 0.05f, .momentum = 0.9f});
  Generator teacher_init(6);
  const Tensor teacher = randn({6, 3}, teacher_init);
  for (int step = 0; step < 300; ++step) {
    Generator data(1000 + static_cast<uint64_t>(step) * 2 + static_cast<uint64_t>(group->rank()));
    const Tensor x = randn({32, 6}, data);
    optimizer.zero_grad();
    cross_entropy(model.forward(x), argmax(matmul(x, teacher))).backward();
    optimizer.step();
  }
  Generator held_out(99);
  const Tensor x = randn({2048, 6}, held_out);
  NoGradGuard no_grad;
  return cross_entropy(model.module().forward(x), argmax(matmul(x, teacher))).item();
}

TEST(CommHookMultiprocess, TrainingWithCompressionFollowsTrainingWithout) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group();
  const double exact = held_out_loss_after_training(group, GradCompression::None);
  EXPECT_LT(exact, 0.3) << "the problem should be learnt";
  for (GradCompression compression : {GradCompression::BFloat16, GradCompression::Float16}) {
    const double compressed = held_out_loss_after_training(group, compression);
    std::printf("held-out loss after 300 steps: %s %.6f, none %.6f\n",
                grad_compression_name(compression), compressed, exact);
    EXPECT_NEAR(compressed, exact, 0.01 + 0.05 * exact) << grad_compression_name(compression);
  }
}

// A hook users could write: counts what it sees, then reduces as the default does.
class RecordingHook final : public CommHook {
 public:
  std::string name() const override { return "recording"; }
  std::shared_ptr<Work> reduce(ProcessGroup& group, const GradBucket& bucket) override {
    indices.push_back(bucket.index);
    lasts.push_back(bucket.last);
    return group.allreduce({bucket.buffer}, ReduceOp::Sum);
  }
  size_t payload_bytes(int64_t elements) const override {
    return static_cast<size_t>(elements) * 4;
  }
  std::vector<size_t> indices;
  std::vector<bool> lasts;
};

TEST(CommHookMultiprocess, AHookSeesEveryBucketInLaunchOrderOnce) {
  TANDEM_RUN_AS_RANKS(2, ddp_ranks_options());
  auto group = gloo_group();
  DdpOptions options;
  options.reducer.first_bucket_mb = 1e-9;  // one parameter per bucket
  options.reducer.bucket_cap_mb = 1e-9;
  DistributedDataParallel model(testing::small_net(3), group, options);
  auto hook = std::make_shared<RecordingHook>();
  model.register_comm_hook(hook);
  EXPECT_NE(error_message([&] { model.register_comm_hook(hook); }).find("only once"),
            std::string::npos);
  Generator data(7 + static_cast<uint64_t>(group->rank()));
  sum(model.forward(randn({4, 6}, data))).backward();
  const size_t buckets = model.reducer().bucket_assignment().size();
  ASSERT_EQ(hook->indices.size(), buckets);
  for (size_t k = 0; k < buckets; ++k) {
    EXPECT_EQ(hook->indices[k], k);
    EXPECT_EQ(hook->lasts[k], k + 1 == buckets);
  }
  DistributedDataParallel late(testing::small_net(3), group);
  sum(late.forward(randn({4, 6}, data))).backward();
  EXPECT_NE(error_message([&] {
              late.register_comm_hook(make_comm_hook(GradCompression::None));
            }).find("before the first backward"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::parallel
