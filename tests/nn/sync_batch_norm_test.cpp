// sync_batch_norm2d's arithmetic in one process (Note [Synchronised batch norm]): with one rank
// its statistics and gradients are batch norm's. Across ranks: tests/parallel (DdpMultiprocess).

#include <gtest/gtest.h>

#include <barrier>
#include <exception>
#include <mutex>
#include <thread>

#include "engine/tandem.h"
#include "nn/batch_norm2d.h"
#include "nn/resnet.h"
#include "nn/sync_batch_norm.h"
#include "tests/support/gradcheck.h"
#include "tests/support/one_rank_reducer.h"
#include "tests/support/tensor_compare.h"

namespace tandem::nn {
namespace {

using OneRank = testing::OneRankReducer;

TEST(SyncBatchNorm, OneRankEqualsBatchNorm) {
  for (const MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
    Generator generator(3);
    const Tensor x = randn({4, 5, 3, 3}, generator, {}, 1.5f).contiguous(format);
    const Tensor gamma = randn({5}, generator, {}, 1.0f), beta = randn({5}, generator);
    const Tensor direction = randn({4, 5, 3, 3}, generator);
    const auto run = [&](bool sync, Tensor& mean, Tensor& var) {
      std::vector<Tensor> leaves{x.clone().set_requires_grad(true),
                                 gamma.clone().set_requires_grad(true),
                                 beta.clone().set_requires_grad(true)};
      const BatchNormOptions options{.training = true, .fuse_relu = true};
      auto reducer = std::make_shared<OneRank>();
      const Tensor y =
          sync ? sync_batch_norm2d(leaves[0], leaves[1], leaves[2], mean, var, options, reducer)
               : batch_norm2d(leaves[0], leaves[1], leaves[2], mean, var, options);
      sum(mul(y, direction)).backward();
      if (sync) {
        EXPECT_EQ(reducer->calls, 2);  // the moments, the backward sums
      }
      return std::vector<Tensor>{y, leaves[0].grad(), leaves[1].grad(), leaves[2].grad()};
    };
    Tensor mean_a = zeros({5}), var_a = ones({5}), mean_b = zeros({5}), var_b = ones({5});
    const auto synced = run(true, mean_a, var_a);
    const auto plain = run(false, mean_b, var_b);
    const char* names[] = {"y", "grad x", "grad gamma", "grad beta"};
    for (size_t i = 0; i < synced.size(); ++i) {
      testing::expect_close_to_reference(synced[i], plain[i], names[i], 1e-5);
    }
    testing::expect_close_to_reference(mean_a, mean_b, "running_mean", 1e-6);
    testing::expect_close_to_reference(var_a, var_b, "running_var", 1e-6);
    EXPECT_EQ(synced[1].memory_format(), x.memory_format());
  }
}

// Ranks as threads of one process, each on its own CPU device (so each backward runs on its own
// autograd worker): sum_over_ranks() hands every rank the sum of every rank's tensor of the same
// call, added in rank order.
class ThreadRanks {
 public:
  explicit ThreadRanks(int size) : slots_(static_cast<size_t>(size)), meet_(size) {}

  class Reducer final : public StatisticsReducer {
   public:
    Reducer(ThreadRanks& ranks, int rank) : ranks_(ranks), rank_(rank) {}
    void sum_over_ranks(Tensor& values) override {
      ++calls;
      ranks_.slots_[static_cast<size_t>(rank_)] = values.to(Device::cpu()).clone();
      ranks_.meet_.arrive_and_wait();
      Tensor total = ranks_.slots_[0].clone();
      for (size_t r = 1; r < ranks_.slots_.size(); ++r) add_(total, ranks_.slots_[r]);
      ranks_.meet_.arrive_and_wait();  // every rank has read every slot
      values.copy_(total.to(values.device()));
    }
    int rank() const override { return rank_; }
    int size() const override { return static_cast<int>(ranks_.slots_.size()); }
    int calls = 0;

   private:
    ThreadRanks& ranks_;
    int rank_;
  };

 private:
  std::vector<Tensor> slots_;
  std::barrier<> meet_;
};

// Note [Synchronised batch norm]: two ranks of uneven shares (3 and 5 images) whose values sit far
// from 0 normalise, and get the gradients, of one batch norm over the 8 images, with one
// collective each way.
TEST(SyncBatchNorm, UnevenRanksCombineTheirMomentsLikeOneBatch) {
  Generator generator(9);
  const Tensor x = add(randn({8, 3, 2, 2}, generator), 1000.0f);  // a mean 1000 std devs out
  const Tensor gamma = randn({3}, generator, {}, 1.0f), beta = randn({3}, generator);
  const Tensor direction = randn({8, 3, 2, 2}, generator);
  const BatchNormOptions options{.training = true};

  const Tensor leaf = x.clone().set_requires_grad(true);
  Tensor mean = zeros({3}), var = ones({3});
  const Tensor expected = batch_norm2d(leaf, gamma, beta, mean, var, options);
  sum(mul(expected, direction)).backward();

  ThreadRanks ranks(2);
  const int64_t split[] = {0, 3, 8};
  std::vector<Tensor> outputs(2), grads(2), means(2), vars(2);
  std::vector<std::exception_ptr> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        const Device device = Device::cpu(r);
        const auto own = [&](const Tensor& t) {
          return t.slice(split[r], split[r + 1]).to(device);
        };
        auto reducer = std::make_shared<ThreadRanks::Reducer>(ranks, r);
        const Tensor share = own(x).clone().set_requires_grad(true);
        means[r] = zeros({3}, {.device = device});
        vars[r] = ones({3}, {.device = device});
        outputs[r] = sync_batch_norm2d(share, gamma.to(device), beta.to(device), means[r], vars[r],
                                       options, reducer);
        sum(mul(outputs[r], own(direction))).backward();
        grads[r] = share.grad().to(Device::cpu());
        EXPECT_EQ(reducer->calls, 2) << "rank " << r;
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  const auto on_cpu = [](const Tensor& t) { return t.to(Device::cpu()); };
  testing::expect_close_to_reference(cat({on_cpu(outputs[0]), on_cpu(outputs[1])}), expected, "y",
                                     1e-4);
  testing::expect_close_to_reference(cat({grads[0], grads[1]}), leaf.grad(), "grad x", 1e-4);
  for (int r = 0; r < 2; ++r) {
    testing::expect_close_to_reference(on_cpu(means[r]), mean, "running_mean", 1e-6);
    testing::expect_close_to_reference(on_cpu(vars[r]), var, "running_var", 1e-4);
  }
}

// Two collectives per batch norm in a training step (N7 of the 2026-11-27 review): 42 for
// ResNet-20's 21, down from 63.
TEST(SyncBatchNorm, AResNet20StepMakesTwoCollectivesPerBatchNorm) {
  Generator init(3);
  auto model = make_resnet("resnet20", init);
  auto reducer = std::make_shared<OneRank>();
  int batch_norms = 0;
  const std::function<void(Module&)> convert = [&](Module& module) {
    if (auto* bn = dynamic_cast<BatchNorm2d*>(&module)) {
      bn->set_statistics_reducer(reducer);
      ++batch_norms;
    }
    for (const auto& [name, child] : module.children()) convert(*child);
  };
  convert(*model);
  ASSERT_EQ(batch_norms, 21);
  Generator generator(4);
  const Tensor images = randn({1, 3, 16, 16}, generator);  // small: only the count matters
  sum(model->forward(images)).backward();
  EXPECT_EQ(reducer->calls, 2 * batch_norms);
}

TEST(SyncBatchNorm, GradientsMatchFiniteDifferences) {
  Generator generator(5);
  auto reducer = std::make_shared<OneRank>();
  const Tensor x = randn({3, 2, 3, 3}, generator, {.requires_grad = true});
  const Tensor gamma = randn({2}, generator, {.requires_grad = true}, 1.0f);
  const Tensor beta = randn({2}, generator, {.requires_grad = true});
  EXPECT_TRUE(testing::check_gradients(
      [&](const std::vector<Tensor>& in) {
        return sync_batch_norm2d(in[0], in[1], in[2], Tensor(), Tensor(), {.training = true},
                                 reducer);
      },
      {x, gamma, beta}));
}

}  // namespace
}  // namespace tandem::nn
