// collapse_dims (Note [Collapsing dims]): the layout every CPU and CUDA elementwise and copy
// kernel walks, checked on its edge cases and against a brute-force walk of random layouts.

#include "engine/backend/collapse_dims.h"

#include <gtest/gtest.h>

#include <random>

#include "tests/support/error_message.h"

namespace tandem {
namespace {

using testing::contains;
using testing::error_message;

void expect_dims(const CollapsedDims& dims, const Shape& shape, const std::vector<Shape>& strides) {
  EXPECT_EQ(dims.shape, shape);
  EXPECT_EQ(dims.strides, strides);
}

TEST(CollapseDims, ZeroDimTensorIsOneElementWithUnitStride) {
  expect_dims(collapse_dims({}, {{}}, "t"), {1}, {{1}});
  expect_dims(collapse_dims({}, {{}, {}}, "t"), {1}, {{1}, {1}});
}

TEST(CollapseDims, AllSizeOneDimsAreOneElementWithUnitStride) {
  // Strides of size-1 dims are arbitrary (a slice, a broadcast): none of them may leak out.
  expect_dims(collapse_dims({1, 1, 1}, {{7, 0, 5}, {0, 0, 0}}, "t"), {1}, {{1}, {1}});
}

TEST(CollapseDims, ContiguousBecomesOneDim) {
  expect_dims(collapse_dims({2, 3, 4}, {contiguous_strides({2, 3, 4})}, "t"), {24}, {{1}});
}

TEST(CollapseDims, SizeOneDimsAreDroppedAndTheirNeighboursMerge) {
  expect_dims(collapse_dims({2, 1, 3}, {{3, 99, 1}}, "t"), {6}, {{1}});
  expect_dims(collapse_dims({1, 4, 1}, {{0, 2, 0}}, "t"), {4}, {{2}});
}

TEST(CollapseDims, EmptyShapeIsOneEmptyDim) {
  expect_dims(collapse_dims({2, 0, 3}, {{0, 3, 1}, {3, 3, 1}}, "t"), {0}, {{1}, {1}});
  expect_dims(collapse_dims({0}, {{1}}, "t"), {0}, {{1}});
}

TEST(CollapseDims, DimsBroadcastInEveryOperandMerge) {
  const Shape out{4, 5};
  expect_dims(collapse_dims(out, {broadcast_strides({1}, out), broadcast_strides({}, out)}, "t"),
              {20}, {{0}, {0}});
}

TEST(CollapseDims, PerChannelBroadcastKeepsOnlyTheChannelDimApart) {
  const Shape out{2, 3, 4, 5};
  const CollapsedDims dims =
      collapse_dims(out, {contiguous_strides(out), broadcast_strides({3, 1, 1}, out)}, "t");
  // N and C stay apart (the bias steps along C only); H and W merge (the bias is 0 on both).
  expect_dims(dims, {2, 3, 20}, {{60, 20, 1}, {0, 1, 0}});
}

TEST(CollapseDims, OneBlockingOperandKeepsDimsApart) {
  const Shape out{2, 3};
  expect_dims(collapse_dims(out, {{1, 0}, {0, 1}}, "t"), {2, 3}, {{1, 0}, {0, 1}});
  expect_dims(collapse_dims(out, {{3, 1}, {0, 1}}, "t"), {2, 3}, {{3, 1}, {0, 1}});
  expect_dims(collapse_dims(out, {{3, 1}, {0, 0}}, "t"), {6}, {{1}, {0}});
}

TEST(CollapseDims, TransposedAndSlicedViewsDoNotMerge) {
  expect_dims(collapse_dims({3, 2}, {{1, 3}}, "t"), {3, 2}, {{1, 3}});
  expect_dims(collapse_dims({4, 3}, {{6, 1}}, "t"), {4, 3}, {{6, 1}});
  // Every other column: the rows still do not merge, but a column slice of one row does.
  expect_dims(collapse_dims({1, 3}, {{8, 2}}, "t"), {3}, {{2}});
}

TEST(CollapseDims, ChannelsLastStrides) {
  // A (2, 3, 4, 5) channels-last tensor seen as NCHW: H and W merge, N and C do not.
  const Shape nchw{2, 3, 4, 5};
  const Shape channels_last{60, 1, 15, 3};
  expect_dims(collapse_dims(nchw, {channels_last}, "t"), {2, 3, 20}, {{60, 1, 3}});
  // Its NHWC view is contiguous: one dim.
  expect_dims(collapse_dims({2, 4, 5, 3}, {{60, 15, 3, 1}}, "t"), {120}, {{1}});
  // With one channel, channels-last and contiguous are the same memory.
  expect_dims(collapse_dims({2, 1, 4, 5}, {{20, 1, 5, 1}}, "t"), {40}, {{1}});
}

// Sizes 2 with strides 4^k: no two neighbours merge, so rank dims come out.
Shape unmergeable_strides(size_t rank) {
  Shape strides(rank);
  int64_t stride = 1;
  for (size_t i = rank; i-- > 0; stride *= 4) strides[i] = stride;
  return strides;
}

TEST(CollapseDims, KernelRankLimitCountsDimsAfterCollapsing) {
  constexpr int kMaxDims = 8;  // the CUDA kernels' fixed-size layouts (cuda/kernels/launch.h)
  const Shape eight(8, 2);
  const CollapsedDims dims = collapse_dims(eight, {unmergeable_strides(8)}, "t");
  EXPECT_EQ(dims.rank(), 8u);
  EXPECT_NO_THROW(check_collapsed_rank(dims, kMaxDims, eight, "copy"));

  const Shape nine(9, 2);
  const CollapsedDims too_many = collapse_dims(nine, {unmergeable_strides(9)}, "t");
  EXPECT_EQ(too_many.rank(), 9u);
  EXPECT_TRUE(
      contains(error_message([&] { check_collapsed_rank(too_many, kMaxDims, nine, "copy"); }),
               "[copy] more than 8 dims that do not merge are not supported (shape [2, 2, "))
      << error_message([&] { check_collapsed_rank(too_many, kMaxDims, nine, "copy"); });

  // Twelve dims of which most merge are fine.
  const Shape twelve(12, 2);
  const CollapsedDims merged = collapse_dims(twelve, {contiguous_strides(twelve)}, "t");
  EXPECT_EQ(merged.shape, Shape{4096});
  EXPECT_NO_THROW(check_collapsed_rank(merged, kMaxDims, twelve, "binary"));
}

TEST(CollapseDims, StridesOfAnotherRankAreAnError) {
  EXPECT_TRUE(contains(error_message([] {
                         collapse_dims({2, 3}, {{1}}, "binary");
                       }),
                       "[binary] strides of rank 1 for a shape of rank 2 [2, 3]"));
}

// Every operand's element offsets, in the row-major order of the shape's elements.
std::vector<std::vector<int64_t>> offsets(const Shape& shape, const std::vector<Shape>& strides) {
  std::vector<std::vector<int64_t>> out(strides.size());
  const int64_t n = shape_numel(shape);
  for (int64_t linear = 0; linear < n; ++linear) {
    int64_t remaining = linear;
    std::vector<int64_t> offset(strides.size(), 0);
    for (size_t d = shape.size(); d-- > 0;) {
      const int64_t index = remaining % shape[d];
      remaining /= shape[d];
      for (size_t k = 0; k < strides.size(); ++k) offset[k] += index * strides[k][d];
    }
    for (size_t k = 0; k < strides.size(); ++k) out[k].push_back(offset[k]);
  }
  return out;
}

// A random stride for each dim: contiguous-like, broadcast (0), or a gap that blocks merging.
Shape random_strides(const Shape& shape, std::mt19937& rng) {
  Shape strides = contiguous_strides(shape);
  std::uniform_int_distribution<int> kind(0, 3);
  for (int64_t& stride : strides) {
    const int k = kind(rng);
    if (k == 1) stride = 0;
    if (k == 2) stride *= 3;
  }
  return strides;
}

TEST(CollapseDims, WalksTheSameOffsetsAsTheOriginalLayout) {
  std::mt19937 rng(15);
  std::uniform_int_distribution<int> rank_of(0, 6);
  std::uniform_int_distribution<int> size_of(1, 4);
  for (int trial = 0; trial < 500; ++trial) {
    Shape shape(static_cast<size_t>(rank_of(rng)));
    for (int64_t& size : shape) size = size_of(rng);
    const Shape a = random_strides(shape, rng);
    const Shape b = random_strides(shape, rng);
    const CollapsedDims dims = collapse_dims(shape, {a, b}, "t");
    ASSERT_EQ(dims.strides.size(), 2u);
    EXPECT_LE(dims.rank(), std::max<size_t>(shape.size(), 1));
    EXPECT_EQ(shape_numel(dims.shape), shape_numel(shape));
    for (const int64_t size : dims.shape) EXPECT_TRUE(size > 1 || dims.rank() == 1);
    EXPECT_EQ(offsets(dims.shape, dims.strides), offsets(shape, {a, b}))
        << "shape " << shape_str(shape) << " strides " << shape_str(a) << " " << shape_str(b);
  }
}

}  // namespace
}  // namespace tandem
