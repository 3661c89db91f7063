// DataParallel on CPU devices against a single device on the same global batch.
#include <gtest/gtest.h>

#include <limits>

#include "engine/ops/concat.h"
#include "nn/grad_scaler.h"
#include "nn/linear.h"
#include "nn/resnet.h"
#include "nn/sgd.h"
#include "parallel/data_parallel.h"
#include "parallel/scatter_gather.h"
#include "tests/support/cuda_skip.h"
#include "tests/support/ddp_fixtures.h"
#include "tests/support/error_message.h"
#include "tests/support/host_reads.h"
#include "tests/support/image_batch.h"
#include "tests/support/split_compare.h"

namespace tandem::parallel {
namespace {

using testing::error_message;
using testing::expect_close_to_unsplit;

using Batch = testing::ImageBatch;
using testing::random_image_batch;

std::shared_ptr<nn::Module> resnet20(uint64_t seed = 7) {
  Generator generator(seed);
  return nn::make_resnet("resnet20", generator);
}

// Loss and gradients of one model on one batch.
Tensor loss_and_backward(nn::Module& model, const Batch& batch) {
  Tensor loss = cross_entropy(model.forward(batch.images), batch.labels);
  loss.backward();
  return loss;
}

TEST(ChunkSizes, FollowsTorchChunk) {
  EXPECT_EQ(chunk_sizes(30, 8), (std::vector<int64_t>{4, 4, 4, 4, 4, 4, 4, 2}));
  EXPECT_EQ(chunk_sizes(9, 4), (std::vector<int64_t>{3, 3, 3}));
  EXPECT_EQ(chunk_sizes(2, 4), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(chunk_sizes(128, 2), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(chunk_sizes(10, 3), (std::vector<int64_t>{4, 4, 2}));
  EXPECT_NE(error_message([] { chunk_sizes(0, 2); }).find("[scatter] cannot split an empty batch"),
            std::string::npos);
}

TEST(ScatterGather, RoundTripCarriesValuesAndGradients) {
  Generator generator(3);
  Tensor x = randn({7, 5}, generator).set_requires_grad(true);
  const std::vector<Device> devices{Device::cpu(0), Device::cpu(1), Device::cpu(2)};
  const std::vector<Tensor> chunks = scatter(x, devices);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[1].device(), Device::cpu(1));
  EXPECT_EQ(chunks[2].size(0), 1);
  std::vector<Tensor> scaled;
  for (size_t i = 0; i < chunks.size(); ++i) scaled.push_back(mul(chunks[i], float(i + 1)));
  Tensor y = gather(scaled, Device::cpu(0));
  EXPECT_EQ(y.device(), Device::cpu(0));
  sum(y, {0, 1}).backward();
  const std::vector<float> grad = x.grad().to_vector<float>();
  const std::vector<float> expected_row_scale{1, 1, 1, 2, 2, 2, 3};
  for (int64_t row = 0; row < 7; ++row) {
    EXPECT_FLOAT_EQ(grad[static_cast<size_t>(row * 5)],
                    expected_row_scale[static_cast<size_t>(row)]);
  }
  EXPECT_EQ(y.to_vector<float>()[35 - 1], 3 * x.to_vector<float>()[34]);
}

// Note: batch-norm in eval mode, so that every shard normalises with the same statistics and the
// data-parallel gradient is the single-device one up to rounding.
// `format`: of DataParallel's master and batch; the single device stays NCHW. `precision`: of
// both models (Note [Mixed precision]).
void expect_matches_single_device(const std::vector<Device>& devices, int64_t batch_size,
                                  bool persistent, MemoryFormat format = MemoryFormat::Contiguous,
                                  nn::Precision precision = nn::Precision::Float32) {
  const Batch batch = random_image_batch(batch_size, 11);
  auto single = resnet20();
  single->set_precision(precision);
  single->eval();
  const Tensor single_loss = loss_and_backward(*single, batch);

  auto master = resnet20();
  master->to(format);
  master->set_precision(precision);
  DataParallel model(master, devices, {.persistent_replicas = persistent});
  model.eval();
  const Tensor loss = loss_and_backward(model, {batch.images.contiguous(format), batch.labels});
  EXPECT_NEAR(loss.item(), single_loss.item(), precision == nn::Precision::BFloat16 ? 1e-3 : 1e-5);

  const auto expected = single->named_parameters();
  const auto actual = model.module().named_parameters();
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    expect_close_to_unsplit(actual[i].second.grad(), expected[i].second.grad(),
                            expected[i].first + ".grad", precision);
    EXPECT_EQ(actual[i].second.grad().memory_format(), actual[i].second.memory_format())
        << expected[i].first;
    EXPECT_EQ(actual[i].second.grad().dtype(), DType::Float32) << expected[i].first;
  }

  // One SGD step on each: the updated parameters agree too.
  nn::Sgd(single->parameters(), {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f}).step();
  nn::Sgd(model.parameters(), {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f}).step();
  for (size_t i = 0; i < expected.size(); ++i) {
    expect_close_to_unsplit(actual[i].second, expected[i].second,
                            expected[i].first + " after a step", precision);
  }
}

TEST(DataParallel, ResNet20OverTwoDevicesMatchesOneDevice) {
  expect_matches_single_device({Device::cpu(0), Device::cpu(1)}, 16, true);
}

TEST(DataParallel, ResNet20OverThreeDevicesUnevenSplitMatchesOneDevice) {
  expect_matches_single_device({Device::cpu(0), Device::cpu(1), Device::cpu(2)}, 10, true);
}

TEST(DataParallel, ReplicasOnOneDeviceMatchOneDevice) {
  expect_matches_single_device({Device::cpu(0), Device::cpu(0)}, 8, true);
}

TEST(DataParallel, RebuiltReplicasMatchOneDevice) {
  expect_matches_single_device({Device::cpu(0), Device::cpu(1)}, 6, false);
}

TEST(DataParallel, ChannelsLastOverTwoDevicesMatchesOneNchwDevice) {
  expect_matches_single_device({Device::cpu(0), Device::cpu(1)}, 16, true,
                               MemoryFormat::ChannelsLast);
  expect_matches_single_device({Device::cpu(0), Device::cpu(1)}, 6, false,
                               MemoryFormat::ChannelsLast);
}

TEST(DataParallel, Bf16OverTwoDevicesMatchesOneBf16Device) {
  expect_matches_single_device({Device::cpu(0), Device::cpu(1)}, 16, true,
                               MemoryFormat::ChannelsLast, nn::Precision::BFloat16);
  expect_matches_single_device({Device::cpu(0), Device::cpu(1)}, 6, false, MemoryFormat::Contiguous,
                               nn::Precision::BFloat16);
}

// Note [Counting host reads]: scatter, replicas, gather and the reduce into the master read
// nothing on the host, so on GPUs the replica threads never wait for a queue to drain.
TEST(DataParallel, TrainingStepsReadNothingOnTheHost) {
  for (const bool persistent : {true, false}) {
    DataParallel model(resnet20(), {Device::cpu(0), Device::cpu(1)},
                       {.persistent_replicas = persistent});
    const Batch batch = random_image_batch(8, 11);
    EXPECT_EQ(testing::host_reads_during([&] { testing::train_steps(model, batch, 2); }), 0)
        << (persistent ? "persistent replicas" : "replicas rebuilt every step");
  }
}

// DataParallel is one process: a GradScaler over the master's optimizer checks the master's
// gradients, into which every replica's are reduced, so an overflow in one replica skips the step.
TEST(DataParallel, AGradScalerSkipsTheStepWhenOneReplicaOverflows) {
  auto master = testing::small_net(7);
  DataParallel model(master, {Device::cpu(0), Device::cpu(1)});
  nn::Sgd sgd(model.parameters(), {.lr = 0.1f, .momentum = 0.9f});
  nn::GradScaler scaler;
  const Tensor labels = from_vector<int64_t>({0, 1, 2, 0, 1, 2, 0, 1}, {8});
  Tensor images = cat({testing::small_net_batch(0, 0), testing::small_net_batch(1, 0)});
  const auto run_step = [&] {
    sgd.zero_grad();
    scaler.scale(cross_entropy(model.forward(images), labels)).backward();
    const bool stepped = scaler.step(sgd);
    scaler.update();
    return stepped;
  };
  EXPECT_TRUE(run_step());
  const std::vector<float> weights = master->parameters()[0].to_vector<float>();
  images.slice(6, 7).fill_(std::numeric_limits<float>::infinity());  // the second replica's rows
  EXPECT_FALSE(run_step());
  EXPECT_EQ(master->parameters()[0].to_vector<float>(), weights);
  EXPECT_EQ(scaler.get_scale(), 32768.0f);
}

TEST(DataParallel, BatchSmallerThanDeviceCountUsesFewerReplicas) {
  DataParallel model(resnet20(), {Device::cpu(0), Device::cpu(1), Device::cpu(2)});
  model.eval();
  const Batch batch = random_image_batch(2, 5);
  loss_and_backward(model, batch);
  EXPECT_EQ(model.last_timings().replicas, 2);
  for (const Tensor& p : model.parameters()) EXPECT_TRUE(p.grad().defined());
}

// A module whose forward returns its loss, a scalar (review D10).
class LossInForward final : public nn::Module {
 public:
  LossInForward() {
    linear_ = register_module("linear", std::make_shared<nn::Linear>(nn::LinearConfig{6, 3}));
    Generator generator(2);
    reset_parameters(generator);
  }
  Tensor forward(const Tensor& x) override { return sum(linear_->forward(x)); }
  std::string describe() const override { return "LossInForward"; }

 protected:
  std::shared_ptr<Module> make_twin() const override { return std::make_shared<LossInForward>(); }

 private:
  std::shared_ptr<nn::Linear> linear_;
};

TEST(DataParallel, ScalarOutputsAreGatheredIntoAVector) {
  Generator generator(4);
  const Tensor x = randn({5, 6}, generator);
  LossInForward single;
  const Tensor whole = single.forward(x);
  DataParallel model(std::make_shared<LossInForward>(), {Device::cpu(0), Device::cpu(1)});
  const Tensor per_replica = model.forward(x);
  ASSERT_EQ(per_replica.shape(), (Shape{2}));  // one loss per replica, as PyTorch gathers them
  EXPECT_NEAR(sum(per_replica).item(), whole.item(), 1e-4);
  sum(per_replica).backward();
  for (const Tensor& p : model.parameters()) EXPECT_TRUE(p.grad().defined());
}

TEST(DataParallel, NamesParametersLikePyTorch) {
  DataParallel model(resnet20(), {Device::cpu(0), Device::cpu(1)});
  const auto names = model.state_dict();
  EXPECT_EQ(names.front().first, "module.conv1.weight");
  EXPECT_EQ(model.parameter_count(), 272474);
}

TEST(DataParallel, PersistentReplicasFollowTheMasterAcrossSteps) {
  auto master = resnet20();
  DataParallel model(master, {Device::cpu(0), Device::cpu(1)});
  nn::Sgd sgd(model.parameters(), {.lr = 0.5f, .momentum = 0.9f});
  for (int step = 0; step < 3; ++step) {
    model.train();
    sgd.zero_grad();
    loss_and_backward(model, random_image_batch(8, 100 + step));
    sgd.step();
    // Replica 1 runs the second half: after the step it must use the master's new values.
    model.eval();
    const Batch probe = random_image_batch(4, 200 + step);
    NoGradGuard no_grad;
    const Tensor parallel_out = model.forward(probe.images);
    const Tensor master_out = master->forward(probe.images);
    EXPECT_FALSE(parallel_out.requires_grad());
    expect_close_to_unsplit(parallel_out, master_out, "output after step " + std::to_string(step));
  }
}

TEST(DataParallel, BatchNormRunningStatsComeFromTheFirstShard) {
  // What torch.nn.DataParallel leaves in the master: replica 0's buffers are the master's.
  const Batch batch = random_image_batch(8, 21);
  auto reference = resnet20();
  reference->train();
  {
    NoGradGuard no_grad;
    reference->forward(batch.images.slice(0, 4));
  }
  DataParallel model(resnet20(), {Device::cpu(0), Device::cpu(1)});
  model.train();
  loss_and_backward(model, batch);
  const auto expected = reference->named_buffers();
  const auto actual = model.module().named_buffers();
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i].second.dtype() != DType::Float32) {
      EXPECT_EQ(actual[i].second.item(), expected[i].second.item()) << expected[i].first;
      continue;
    }
    expect_close_to_unsplit(actual[i].second, expected[i].second, expected[i].first);
  }
}

// Throws from the replica that runs on `bad`.
class FailsOnDevice final : public nn::Module {
 public:
  explicit FailsOnDevice(Device bad) : bad_(bad) {
    weight_ = register_parameter("weight", ones({1}));
  }
  Tensor forward(const Tensor& input) override {
    TANDEM_CHECK(input.device() != bad_, "[FailsOnDevice] refusing to run on ", bad_);
    return mul(input, weight_);
  }
  std::string describe() const override { return "FailsOnDevice"; }

 protected:
  std::shared_ptr<Module> make_twin() const override {
    return std::make_shared<FailsOnDevice>(bad_);
  }

 private:
  Device bad_;
  Tensor weight_;
};

TEST(DataParallel, ReplicaExceptionReachesTheCaller) {
  DataParallel model(std::make_shared<FailsOnDevice>(Device::cpu(1)),
                     {Device::cpu(0), Device::cpu(1), Device::cpu(2)});
  const std::string message = error_message([&] { model.forward(ones({6, 2})); });
  EXPECT_NE(message.find("[DataParallel] replica 1 on cpu:1 failed"), std::string::npos) << message;
  EXPECT_NE(message.find("[FailsOnDevice] refusing to run on cpu:1"), std::string::npos) << message;
  // The model still works once the input avoids the failing device.
  EXPECT_EQ(model.forward(ones({1, 2})).size(0), 1);
}

TEST(DataParallel, BadDeviceListsAreRejected) {
  EXPECT_NE(error_message([] { parse_device_list("cpu:0,,cpu:1"); }).find("empty entry"),
            std::string::npos);
  EXPECT_NE(error_message([] { parse_device_list("cpu:0,gpu:1"); }).find("gpu:1"),
            std::string::npos);
  EXPECT_EQ(parse_device_list("cpu:0,cpu:0").size(), 2u);
  EXPECT_NE(error_message([] { DataParallel(resnet20(), {}); }).find("needs at least one device"),
            std::string::npos);
  EXPECT_NE(error_message([] {
              DataParallel(resnet20(), {Device::cpu(0), Device::cuda(0)});
            }).find("all CPU or all CUDA"),
            std::string::npos);
  if (!cuda_available()) {
    EXPECT_NE(error_message([] {
                DataParallel(resnet20(), {Device::cuda(0)});
              }).find("no CUDA backend or no GPU"),
              std::string::npos);
  }
  DataParallel elsewhere(resnet20(), {Device::cpu(1), Device::cpu(0)});
  EXPECT_NE(error_message([&] {
              elsewhere.forward(ones({2, 3, 32, 32}));
            }).find("must have its parameters and buffers on cpu:1"),
            std::string::npos);
}

// The default GPU training mode (scripts/train.sh): DataParallel over two GPUs against the same
// model on one GPU, gradients and three SGD steps. Replica threads lease cuDNN/cuBLAS handles,
// copies go GPU to GPU (peer access where the GPUs allow it), gradients are reduced on cuda:0.
TEST(DataParallelGpu, ResNet20OnTwoGpusMatchesOneGpuOverThreeSteps) {
  TANDEM_SKIP_WITHOUT_CUDA();
  if (cuda_runtime().device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  const Device gpu0 = Device::cuda(0), gpu1 = Device::cuda(1);
  auto single = resnet20();
  single->to(gpu0);
  single->eval();
  auto master = resnet20();
  master->to(gpu0);
  DataParallel model(master, {gpu0, gpu1});
  model.eval();
  const nn::SgdConfig options{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f};
  nn::Sgd single_sgd(single->parameters(), options);
  nn::Sgd model_sgd(model.parameters(), options);
  const auto expected = single->named_parameters();
  const auto actual = model.module().named_parameters();
  ASSERT_EQ(actual.size(), expected.size());
  for (int step = 0; step < 3; ++step) {
    const Batch batch = random_image_batch(32, 20 + static_cast<uint64_t>(step));
    const Batch on_gpu{batch.images.to(gpu0), batch.labels.to(gpu0)};
    single_sgd.zero_grad();
    model_sgd.zero_grad();
    const Tensor single_loss = loss_and_backward(*single, on_gpu);
    const Tensor loss = loss_and_backward(model, on_gpu);
    EXPECT_NEAR(loss.item(), single_loss.item(), 1e-4) << "step " << step;
    for (size_t i = 0; i < expected.size(); ++i) {
      expect_close_to_unsplit(actual[i].second.grad(), expected[i].second.grad(),
                              expected[i].first + ".grad at step " + std::to_string(step));
    }
    single_sgd.step();
    model_sgd.step();
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(actual[i].second.device(), gpu0) << expected[i].first;
    expect_close_to_unsplit(actual[i].second, expected[i].second,
                            expected[i].first + " after 3 steps");
  }
}

}  // namespace
}  // namespace tandem::parallel
