// The Reducer's bucket logic and DDP's options in one process (a Gloo group of size 1); the
// multi-process behaviour is in ddp_multiprocess_test.cpp.
#include <gtest/gtest.h>

#include <set>

#include "engine/tandem.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "parallel/comm/gloo/gloo_process_group.h"
#include "parallel/distributed_data_parallel.h"
#include "tests/support/error_message.h"

namespace tandem::parallel {
namespace {

using testing::error_message;
using namespace std::chrono_literals;

std::shared_ptr<ProcessGroup> solo_group() {
  auto store =
      std::make_shared<TcpStore>(TcpStoreOptions{.port = 0, .is_server = true, .timeout = 10s});
  return std::make_shared<GlooProcessGroup>(store, 0, 1, ProcessGroupOptions{.timeout = 10s});
}

// Registers `second` before `first` but runs first → second, so the order gradients arrive in
// (second's, then first's) is not the reverse registration order.
class OutOfOrder final : public nn::Module {
 public:
  OutOfOrder() {
    second_ = register_module("second", std::make_shared<nn::Linear>(nn::LinearConfig{4, 3}));
    first_ = register_module("first", std::make_shared<nn::Linear>(nn::LinearConfig{8, 4}));
    unused_ = register_module("unused", std::make_shared<nn::Linear>(nn::LinearConfig{8, 8}));
    Generator generator(1);
    reset_parameters(generator);
  }
  Tensor forward(const Tensor& x) override { return second_->forward(relu(first_->forward(x))); }
  std::string describe() const override { return "OutOfOrder"; }

 protected:
  std::shared_ptr<Module> make_twin() const override { return std::make_shared<OutOfOrder>(); }

 private:
  std::shared_ptr<nn::Linear> second_, first_, unused_;
};

Tensor input_rows(int64_t n, uint64_t seed) {
  Generator generator(seed);
  return randn({n, 8}, generator);
}

// Gradients of the same model without DDP, for comparison.
std::vector<Tensor> plain_gradients(const std::vector<Tensor>& batches) {
  OutOfOrder model;
  for (const Tensor& batch : batches) sum(model.forward(batch)).backward();
  std::vector<Tensor> grads;
  for (const Tensor& p : model.parameters()) grads.push_back(p.grad());
  return grads;
}

void expect_same_values(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.defined(), expected.defined()) << what;
  if (!expected.defined()) return;
  const auto a = actual.to_vector<float>(), e = expected.to_vector<float>();
  ASSERT_EQ(a.size(), e.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], e[i], 1e-5) << what << "[" << i << "]";
}

DdpOptions one_parameter_per_bucket() {
  DdpOptions options;
  options.reducer.first_bucket_mb = 1e-9;
  options.reducer.bucket_cap_mb = 1e-9;
  options.reducer.find_unused_parameters = true;
  return options;
}

TEST(AssignBuckets, CapsInOrderAndOversizedParametersAlone) {
  // bytes of parameters 0..4; order 4,3,2,1,0 (reverse registration).
  const std::vector<size_t> bytes{100, 600, 300, 50, 2000};
  EXPECT_EQ(assign_buckets({4, 3, 2, 1, 0}, bytes, 1000, 1000),
            (std::vector<std::vector<size_t>>{{4}, {3, 2, 1}, {0}}));
  // A small first bucket, then larger ones.
  EXPECT_EQ(assign_buckets({0, 1, 2, 3}, bytes, 150, 1000),
            (std::vector<std::vector<size_t>>{{0}, {1, 2, 3}}));
  EXPECT_EQ(assign_buckets({}, bytes, 10, 10), (std::vector<std::vector<size_t>>{}));
}

TEST(Reducer, BucketsFollowReverseRegistrationThenArrivalOrder) {
  DistributedDataParallel model(std::make_shared<OutOfOrder>(), solo_group(),
                                one_parameter_per_bucket());
  // Parameters: 0 second.weight, 1 second.bias, 2 first.weight, 3 first.bias, 4/5 unused.
  EXPECT_EQ(model.reducer().bucket_assignment(),
            (std::vector<std::vector<size_t>>{{5}, {4}, {3}, {2}, {1}, {0}}));
  for (int step = 0; step < 2; ++step) sum(model.forward(input_rows(4, step))).backward();
  const auto rebuilt = model.reducer().bucket_assignment();
  ASSERT_EQ(rebuilt.size(), 6u);
  // Unused ones are marked at the start of backward; then second's gradients arrive before first's.
  EXPECT_EQ((std::set<size_t>{rebuilt[0][0], rebuilt[1][0]}), (std::set<size_t>{4, 5}));
  EXPECT_EQ((std::set<size_t>{rebuilt[2][0], rebuilt[3][0]}), (std::set<size_t>{0, 1}));
  EXPECT_EQ((std::set<size_t>{rebuilt[4][0], rebuilt[5][0]}), (std::set<size_t>{2, 3}));
}

// Note [Bucket order on resume]: what a checkpoint saves is the order the next step reduces in,
// and a Reducer restored with it builds those buckets and does not rebuild again.
TEST(Reducer, BucketOrderSavedAfterAnyStepRestoresTheSameBuckets) {
  DistributedDataParallel model(std::make_shared<OutOfOrder>(), solo_group(),
                                one_parameter_per_bucket());
  EXPECT_TRUE(model.reducer().bucket_order().empty());  // the initial buckets: nothing to save
  sum(model.forward(input_rows(4, 0))).backward();
  const std::vector<size_t> after_one = model.reducer().bucket_order();  // the rebuild is due
  ASSERT_EQ(after_one.size(), 6u);
  EXPECT_NE(after_one, (std::vector<size_t>{5, 4, 3, 2, 1, 0}));  // the arrival order
  sum(model.forward(input_rows(4, 1))).backward();                // rebuilds from it
  EXPECT_EQ(model.reducer().bucket_order(), after_one);
  const auto rebuilt = model.reducer().bucket_assignment();

  DistributedDataParallel resumed(std::make_shared<OutOfOrder>(), solo_group(),
                                  one_parameter_per_bucket());
  resumed.reducer().restore_bucket_order(after_one);
  EXPECT_EQ(resumed.reducer().bucket_assignment(), rebuilt);
  for (int step = 0; step < 2; ++step) {
    sum(resumed.forward(input_rows(4, 2 + step))).backward();
    EXPECT_EQ(resumed.reducer().bucket_assignment(), rebuilt) << "step " << step;
  }
  EXPECT_NE(error_message([&] {
              resumed.reducer().restore_bucket_order(after_one);
            }).find("[DDP] restore_bucket_order must be called before the first backward pass"),
            std::string::npos);
  DistributedDataParallel fresh(std::make_shared<OutOfOrder>(), solo_group(),
                                one_parameter_per_bucket());
  EXPECT_NE(error_message([&] {
              fresh.reducer().restore_bucket_order({0, 1, 2, 3, 4, 4});
            })
                .find("[DDP] a saved bucket order must name each of the model's 6 parameters "
                      "once; it has 6 entries"),
            std::string::npos);
}

// The first bucket is meant to be the small one: a first_bucket_mb above bucket_cap_mb is
// capped there, whoever set it.
TEST(Reducer, FirstBucketIsAtMostTheCap) {
  DdpOptions options;
  options.reducer.first_bucket_mb = 1;
  options.reducer.bucket_cap_mb = 100.0 / (1024 * 1024);  // 100 bytes
  options.reducer.find_unused_parameters = true;
  DistributedDataParallel model(std::make_shared<OutOfOrder>(), solo_group(), options);
  // Bytes in reverse registration order: 5 unused.bias 32, 4 unused.weight 256, 3 first.bias 16,
  // 2 first.weight 128, 1 second.bias 12, 0 second.weight 48. A 1 MiB first bucket would hold
  // them all.
  EXPECT_EQ(model.reducer().bucket_assignment(),
            (std::vector<std::vector<size_t>>{{5}, {4}, {3}, {2}, {1, 0}}));
}

TEST(Reducer, GradientsMatchThePlainModelBeforeAndAfterTheRebuild) {
  DistributedDataParallel model(std::make_shared<OutOfOrder>(), solo_group(),
                                one_parameter_per_bucket());
  for (int step = 0; step < 3; ++step) {
    model.zero_grad();
    const Tensor x = input_rows(5, 10 + step);
    sum(model.forward(x)).backward();
    const auto expected = plain_gradients({x});
    const auto params = model.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      expect_same_values(params[i].grad(), expected[i],
                         "step " + std::to_string(step) + " param " + std::to_string(i));
    }
    EXPECT_EQ(model.reducer().timer().last_step().buckets.size(), 6u);
  }
}

TEST(Reducer, UnusedParameterWithoutTheOptionIsAClearError) {
  DistributedDataParallel model(std::make_shared<OutOfOrder>(), solo_group());
  const std::string message =
      error_message([&] { sum(model.forward(input_rows(2, 1))).backward(); });
  EXPECT_NE(message.find("without a gradient for: unused.weight, unused.bias"), std::string::npos)
      << message;
  EXPECT_NE(message.find("find_unused_parameters = true"), std::string::npos) << message;
}

TEST(Reducer, NoSyncAccumulatesAndTheNextStepReducesTheSum) {
  DistributedDataParallel model(std::make_shared<OutOfOrder>(), solo_group(),
                                one_parameter_per_bucket());
  const std::vector<Tensor> batches{input_rows(3, 1), input_rows(3, 2), input_rows(3, 3)};
  {
    auto no_sync = model.no_sync();
    sum(model.forward(batches[0])).backward();
    sum(model.forward(batches[1])).backward();
  }
  sum(model.forward(batches[2])).backward();
  const auto expected = plain_gradients(batches);
  const auto params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i)
    expect_same_values(params[i].grad(), expected[i], "param " + std::to_string(i));
}

TEST(Reducer, GradientsCanBeViewsOfTheBuckets) {
  DdpOptions options;
  options.reducer.gradient_as_bucket_view = true;
  options.reducer.find_unused_parameters = true;
  DistributedDataParallel model(std::make_shared<OutOfOrder>(), solo_group(), options);
  for (int step = 0; step < 3; ++step) {  // through the rebuild after step 1
    model.zero_grad();
    const Tensor x = input_rows(4, 30 + step);
    sum(model.forward(x)).backward();
    const auto expected = plain_gradients({x});
    const auto params = model.parameters();
    // One bucket (1 MB holds them all): used parameters' gradients share its storage.
    EXPECT_EQ(params[0].grad().storage(), params[3].grad().storage());
    for (size_t i = 0; i < params.size(); ++i)
      expect_same_values(params[i].grad(), expected[i], "param " + std::to_string(i));
  }
}

TEST(Reducer, WithoutOverlapEveryAllReduceStartsAfterBackward) {
  DdpOptions options = one_parameter_per_bucket();
  options.reducer.overlap = false;
  DistributedDataParallel model(std::make_shared<OutOfOrder>(), solo_group(), options);
  sum(model.forward(input_rows(4, 1))).backward();
  const ReducerStepStats stats = model.reducer().timer().last_step();
  ASSERT_EQ(stats.buckets.size(), 6u);
  for (const BucketTiming& bucket : stats.buckets) {
    EXPECT_GE(bucket.started_ms, 0.0);
    EXPECT_LE(bucket.ready_ms, 0.0);
    EXPECT_GE(bucket.ended_ms, bucket.started_ms);
  }
  EXPECT_EQ(stats.hidden_fraction, 0.0);
}

// A timed loop takes each step's record without waiting (Note [Phase timing] in
// apps/bench_cifar/timed_steps.h) and reads it later: the same timings last_step() gives.
TEST(Reducer, AStepRecordIsTakenOnceAndReadLater) {
  DistributedDataParallel model(std::make_shared<OutOfOrder>(), solo_group(),
                                one_parameter_per_bucket());
  EXPECT_FALSE(model.reducer().timer().take_step_record().has_value()) << "no step yet";
  sum(model.forward(input_rows(4, 1))).backward();
  const std::optional<ReducerStepRecord> record = model.reducer().timer().take_step_record();
  ASSERT_TRUE(record.has_value());
  EXPECT_FALSE(model.reducer().timer().take_step_record().has_value()) << "taken once";
  EXPECT_TRUE(record->collectives_done()) << "Gloo's all-reduces end before backward returns";
  const ReducerStepStats stats = ReducerTimer::stats_of(*record);
  ASSERT_EQ(stats.buckets.size(), 6u);
  EXPECT_GT(stats.payload_bytes, 0u);
  for (const BucketTiming& bucket : stats.buckets) EXPECT_GE(bucket.ended_ms, bucket.started_ms);
  // The next step's record goes to whoever reads first; last_step() after a take keeps the
  // stats it read before (none here).
  EXPECT_TRUE(model.reducer().timer().last_step().buckets.empty());
  sum(model.forward(input_rows(4, 1))).backward();
  EXPECT_EQ(model.reducer().timer().last_step().buckets.size(), 6u);
  EXPECT_FALSE(model.reducer().timer().take_step_record().has_value());
}

TEST(Reducer, SecondBackwardWithoutForwardOnlyAccumulatesLocally) {
  // As in PyTorch: only a DDP forward arms the hooks; finalize() disarms them.
  DistributedDataParallel model(std::make_shared<OutOfOrder>(), solo_group(),
                                one_parameter_per_bucket());
  Tensor loss = sum(model.forward(input_rows(2, 1)));
  loss.backward(Tensor(), /*retain_graph=*/true);
  const std::vector<float> once = model.parameters()[0].grad().to_vector<float>();
  loss.backward();
  const std::vector<float> twice = model.parameters()[0].grad().to_vector<float>();
  for (size_t i = 0; i < once.size(); ++i) EXPECT_NEAR(twice[i], 2 * once[i], 1e-5);
}

}  // namespace
}  // namespace tandem::parallel
