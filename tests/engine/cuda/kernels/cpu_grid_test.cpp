// The CPU grid emulator and the grid-stride loop it shares with the CUDA kernels: every index
// runs exactly once on the launch grid and on grids far too small, including the real launch
// geometry past its 2^20-block cap, where each thread loops.

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "engine/cuda/kernels/elementwise.h"
#include "engine/cuda/kernels/grid.h"
#include "engine/cuda/kernels/pool.h"
#include "tests/support/cpu_grid.h"

namespace tandem::testing {
namespace {

namespace k = cuda::kernels;

struct CountBody {
  int* counts;
  int64_t n;
  void operator()(int64_t i) const { ++counts[i]; }
};

TEST(CpuGrid, GridStrideRunsEveryIndexExactlyOnce) {
  for (const int64_t n : {0, 1, 31, 32, 33, 255, 256, 257, 1000, 70001}) {
    std::vector<CpuGrid> grids = grids_for(n);
    grids.push_back({5, 7});
    grids.push_back({1, 256});
    for (const CpuGrid& grid : grids) {
      std::vector<int> counts(static_cast<size_t>(n) + 1, 0);  // one past the end stays 0
      run_grid_stride(CountBody{counts.data(), n}, grid);
      for (int64_t i = 0; i <= n; ++i) {
        ASSERT_EQ(counts[i], i < n ? 1 : 0)
            << "n " << n << ", grid " << grid.blocks << "x" << grid.threads << ", index " << i;
      }
    }
  }
}

TEST(CpuGrid, RunGridVisitsEveryThreadOfEveryBlockOnce) {
  const CpuGrid grid{6, 40};
  std::vector<int> seen(static_cast<size_t>(grid.blocks * grid.threads), 0);
  run_grid(grid, [&](int64_t block, int64_t thread) { ++seen[block * grid.threads + thread]; });
  for (const int count : seen) EXPECT_EQ(count, 1);
}

TEST(CpuGrid, LaunchGridIsCappedAtTwoTo20Blocks) {
  EXPECT_EQ(k::blocks_for(0), 1u);
  EXPECT_EQ(k::blocks_for(1), 1u);
  EXPECT_EQ(k::blocks_for(256), 1u);
  EXPECT_EQ(k::blocks_for(257), 2u);
  EXPECT_EQ(k::blocks_for(int64_t{256} << 20), 1u << 20);
  EXPECT_EQ(k::blocks_for((int64_t{256} << 20) + 1), 1u << 20);
  EXPECT_EQ(k::blocks_for(int64_t{1} << 40), 1u << 20);
}

// Count, sum and sum of squares of the indices visited: all three match only if every index in
// [0, n) ran once (a duplicate and a miss would have to cancel in both sums).
struct TallyBody {
  struct Tally {
    int64_t count = 0;
    unsigned __int128 sum = 0, squares = 0;
  };
  Tally* tally;
  int64_t n;
  void operator()(int64_t i) const {
    ++tally->count;
    tally->sum += static_cast<unsigned __int128>(i);
    tally->squares += static_cast<unsigned __int128>(i) * static_cast<unsigned __int128>(i);
  }
};

TEST(CpuGrid, LaunchGeometryWrapsPastItsFirstPass) {
  // 2^28 + 3 elements: the launch grid is capped at 2^20 x 256 = 2^28 threads, so the first
  // three threads run a second pass, as on a GPU.
  const int64_t n = (int64_t{1} << 28) + 3;
  const CpuGrid grid = launch_grid(n);
  ASSERT_EQ(grid.blocks * grid.threads, int64_t{1} << 28);
  TallyBody::Tally tally;
  run_grid_stride(TallyBody{&tally, n}, grid);
  const auto m = static_cast<unsigned __int128>(n);
  EXPECT_EQ(tally.count, n);
  EXPECT_TRUE(tally.sum == m * (m - 1) / 2);
  EXPECT_TRUE(tally.squares == (m - 1) * m * (2 * m - 1) / 6);
}

TEST(CpuGrid, EmptyTensorsTouchNoMemory) {
  // Null pointers: a body that ran for an empty tensor would crash.
  const k::PoolShape empty{0, 3, 4, 4, 2, 2, 2, 2, 0};
  for (const CpuGrid& grid : grids_for(0)) {
    run_grid_stride(k::UnaryBody<UnaryOp::Exp>{nullptr, 0.0f, nullptr, 0}, grid);
    run_grid_stride(k::AddChannelBiasBody<float>{nullptr, nullptr, 3, 4, 0}, grid);
    run_grid_stride(k::MaxPool2dForwardBody<float>{nullptr, empty, nullptr, nullptr, 0}, grid);
    run_grid_stride(k::AdaptiveAvgPool2dBackwardBody<float>{nullptr, empty, nullptr, 0}, grid);
  }
}

}  // namespace
}  // namespace tandem::testing
