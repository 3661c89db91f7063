// sync_batch_norm2d's arithmetic in one process (Note [Synchronised batch norm]): with one rank
// its statistics and gradients are batch norm's. Across ranks: tests/parallel (DdpMultiprocess).

#include <gtest/gtest.h>

#include "engine/tandem.h"
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
        EXPECT_EQ(reducer->calls, 3);  // mean, variance, backward sums
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
