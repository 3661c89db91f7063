// How the batch-norm kernels split a tensor (kernels/norm_plan.h) and walk it without dividing
// (kernels/norm_walk.h), against plain division.

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "engine/cuda/kernels/norm_plan.h"
#include "engine/cuda/kernels/norm_walk.h"
#include "tests/engine/cuda/kernels/body_checks.h"

namespace tandem::testing {
namespace {

namespace k = cuda::kernels;

constexpr int kH100 = 132;

TEST(NormPlan, ResNet20StagesFillAnH100) {
  // Batch 128 in bfloat16, packs of 8: stage 1 (C = 16, 32x32), 2 (32, 16x16), 3 (64, 8x8).
  const k::NormPlan stage1 = k::plan_norm({128, 16, 1024}, 8, kH100);
  EXPECT_EQ(stage1.packs, 128 * 1024 / 8);
  EXPECT_EQ(stage1.splits, 33);  // ⌈4 · 132 / 16⌉ blocks per channel: 528 in all
  const k::NormPlan stage2 = k::plan_norm({128, 32, 256}, 8, kH100);
  EXPECT_EQ(stage2.splits, 16);  // 4096 packs: 16 chunks of 256
  // 1024 packs per channel: at most 4 blocks of 256 threads with a pack each.
  const k::NormPlan stage3 = k::plan_norm({128, 64, 64}, 8, kH100);
  EXPECT_EQ(stage3.splits, 4);
  EXPECT_EQ(stage3.chunk, 256);
}

TEST(NormPlan, EverySplitHasValuesAndTheyAddUpToTheChannel) {
  std::mt19937_64 random(3);
  for (int trial = 0; trial < 300; ++trial) {
    const k::NormShape s{random_int(random, 1, 300), random_int(random, 1, 600),
                         random_int(random, 1, 70)};
    const int pack = s.hw % 8 == 0 && trial % 2 == 0 ? 8 : 1;
    const k::NormPlan plan = k::plan_norm(s, pack, static_cast<int>(random_int(random, 1, 200)));
    ASSERT_GE(plan.splits, 1);
    ASSERT_LE(plan.splits, k::kMaxSplits);
    int64_t values = 0;
    for (int64_t split = 0; split < plan.splits; ++split) {
      ASSERT_GT(k::split_values(plan, split), 0) << split;
      values += k::split_values(plan, split);
    }
    EXPECT_EQ(values, s.n * s.hw);
    EXPECT_GE(k::norm_workspace_floats(plan, s.c), static_cast<size_t>(s.c * plan.splits * 2));
  }
}

TEST(NormPlan, EmptyTensorsGetAnEmptyPlan) {
  EXPECT_EQ(k::plan_norm({0, 4, 9}, 1, kH100).packs, 0);
  EXPECT_EQ(k::plan_norm({2, 0, 9}, 1, kH100).chunk, 0);
}

TEST(NormPlan, PacksNeedWholeRowsAndAlignedPointers) {
  alignas(16) static float data[64];
  EXPECT_EQ(k::norm_pack({2, 3, 16}, 2, {data, data + 16}), 8);  // bfloat16: 8 per 16 bytes
  EXPECT_EQ(k::norm_pack({2, 3, 16}, 4, {data}), 4);
  EXPECT_EQ(k::norm_pack({2, 3, 12}, 2, {data}), 1);  // a row of 12 is not a whole number of 8
  EXPECT_EQ(k::norm_pack({2, 3, 16}, 4, {data, data + 1}), 1);  // one pointer 4 bytes off
  EXPECT_EQ(k::norm_pack({2, 3, 16}, 4, {data, nullptr}), 4);   // absent (no fused ReLU's y)
}

// ChannelWalk visits pack j of channel c at ((j / row) * C + c) * HW + (j % row) * V.
TEST(NormWalk, ChannelWalkMatchesDivision) {
  std::mt19937_64 random(5);
  for (int trial = 0; trial < 500; ++trial) {
    const int v = trial % 3 == 0 ? 4 : 1;
    const k::NormShape s{random_int(random, 1, 9), random_int(random, 1, 7),
                         v * random_int(random, 1, 40)};
    const int64_t row = s.hw / v;
    const int64_t c = random_int(random, 0, s.c - 1);
    const int64_t step = random_int(random, 1, 300);
    int64_t j = random_int(random, 0, 50);
    k::ChannelWalk walk(s, v, c, j, step);
    for (; j < s.n * row; j += step, walk.advance()) {
      ASSERT_EQ(walk.offset, ((j / row) * s.c + c) * s.hw + (j % row) * v)
          << "trial " << trial << " pack " << j;
    }
  }
}

// TensorWalk tracks the channel (i / row) % C of pack i.
TEST(NormWalk, TensorWalkMatchesDivision) {
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int v = trial % 3 == 0 ? 8 : 1;
    const k::NormShape s{random_int(random, 1, 9), random_int(random, 1, 40),
                         v * random_int(random, 1, 20)};
    const int64_t row = s.hw / v;
    const int64_t step = random_int(random, 1, 2000);
    int64_t i = random_int(random, 0, 300);
    k::TensorWalk walk(s, v, i, step);
    for (; i < s.n * s.c * row; i += step, walk.advance()) {
      ASSERT_EQ(walk.channel, (i / row) % s.c) << "trial " << trial << " pack " << i;
    }
  }
}

}  // namespace
}  // namespace tandem::testing
