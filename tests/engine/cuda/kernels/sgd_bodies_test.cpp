// The SGD bodies of elementwise.cu (one tensor, many tensors per launch) and the host-side
// chunking of the multi-tensor launches (Note [Multi-tensor SGD] in kernels/sgd.h).

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/cuda/kernels/sgd.h"
#include "engine/tandem.h"
#include "tests/engine/cuda/kernels/body_checks.h"
#include "tests/support/cpu_grid.h"
#include "tests/support/error_message.h"

namespace tandem::testing {
namespace {

namespace k = cuda::kernels;

k::SgdParams to_kernel(const SgdStepOptions& o) {
  return {o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov, o.first_step};
}

std::vector<SgdStepOptions> every_kind_of_step() {
  return {{.lr = 0.1f},
          {.lr = 0.05f, .weight_decay = 5e-4f},
          {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f, .first_step = true},
          {.lr = 0.1f, .momentum = 0.9f, .dampening = 0.1f, .weight_decay = 1e-4f},
          {.lr = 0.01f, .momentum = 0.9f, .weight_decay = 5e-4f, .nesterov = true}};
}

TEST(SgdBodies, OneTensorMatchesTheCpuBackendBitForBit) {
  for (const SgdStepOptions& o : every_kind_of_step()) {
    for (const int64_t n : {1, 4096, 10007}) {
      const Tensor param = random_tensor({n}, 1), grad = random_tensor({n}, 2);
      const Tensor buffer = random_tensor({n}, 3);
      Tensor expected_param = param.clone(), expected_buffer = buffer.clone();
      cpu().sgd_step(expected_param, grad, expected_buffer, o);
      for (const CpuGrid& grid : grids_for(n)) {
        Tensor p = param.clone(), b = buffer.clone();
        float* b_data = o.momentum != 0.0f ? b.data<float>() : nullptr;
        run_grid_stride(k::SgdBody{p.data<float>(), grad.data<float>(), b_data, to_kernel(o), n},
                        grid);
        const std::string what =
            "momentum " + std::to_string(o.momentum) + ", n " + std::to_string(n);
        expect_all_equal(p.to_vector<float>(), expected_param.to_vector<float>(), what);
        expect_all_equal(b.to_vector<float>(), expected_buffer.to_vector<float>(), what);
      }
    }
  }
}

// A random parameter list: empty tensors, sizes on and around the 4096-element block edge, and
// a few large ones.
std::vector<int64_t> random_sizes(std::mt19937_64& random) {
  const int64_t edge = k::kSgdBlockElements;
  const std::vector<int64_t> special = {0, 1, edge - 1, edge, edge + 1, 2 * edge, 3 * edge + 5};
  std::vector<int64_t> sizes(static_cast<size_t>(random_int(random, 1, 120)));
  for (int64_t& n : sizes) {
    const int64_t kind = random_int(random, 0, 9);
    n = kind < 4   ? special[random_int(random, 0, static_cast<int64_t>(special.size()) - 1)]
        : kind < 9 ? random_int(random, 1, 3000)
                   : random_int(random, 10000, 40000);
  }
  return sizes;
}

struct Parameter {
  std::vector<float> param, grad, buffer;
};

// Runs the multi-tensor kernel as sgd_step_multi() launches it: one grid per chunk,
// chunk.first_block[count] blocks of `threads`.
void step_multi(std::vector<Parameter>& list, const k::SgdParams& o, int64_t threads) {
  std::vector<k::SgdTensorPointers> pointers;
  for (Parameter& p : list) {
    pointers.push_back({p.param.data(), p.grad.data(),
                        o.momentum != 0.0f ? p.buffer.data() : nullptr,
                        static_cast<int64_t>(p.param.size())});
  }
  k::for_each_sgd_chunk(pointers.data(), static_cast<int64_t>(pointers.size()),
                        [&](const k::SgdChunk& chunk, int64_t blocks) {
                          run_grid({blocks, threads}, [&](int64_t block, int64_t thread) {
                            k::sgd_multi_block(chunk, o, static_cast<int>(block), thread, threads);
                          });
                        });
}

TEST(SgdBodies, ManyTensorsPerLaunchEqualPerTensorStepsBitForBit) {
  std::mt19937_64 random(17);
  for (int round = 0; round < 20; ++round) {
    const std::vector<int64_t> sizes = random_sizes(random);
    const SgdStepOptions options =
        every_kind_of_step()[round % 5];  // a copy: the list is a temporary
    const k::SgdParams o = to_kernel(options);
    std::vector<Parameter> list;
    for (size_t t = 0; t < sizes.size(); ++t) {
      const int64_t n = sizes[t];
      const uint64_t seed = 1000 * round + t;
      list.push_back({random_tensor({n}, seed).to_vector<float>(),
                      random_tensor({n}, seed + 1).to_vector<float>(),
                      random_tensor({n}, seed + 2).to_vector<float>()});
    }
    std::vector<Parameter> expected = list;
    for (Parameter& p : expected) {
      float* buffer = o.momentum != 0.0f ? p.buffer.data() : nullptr;
      run_grid_stride(k::SgdBody{p.param.data(), p.grad.data(), buffer, o,
                                 static_cast<int64_t>(p.param.size())});
    }
    for (const int64_t threads : {int64_t{k::kThreads}, int64_t{96}}) {
      std::vector<Parameter> actual = list;
      step_multi(actual, o, threads);
      for (size_t t = 0; t < list.size(); ++t) {
        const std::string what = "round " + std::to_string(round) + ", tensor " +
                                 std::to_string(t) + " of " + std::to_string(sizes[t]);
        expect_all_equal(actual[t].param, expected[t].param, what);
        expect_all_equal(actual[t].buffer, expected[t].buffer, what);
      }
    }
  }
}

// The planner alone: sizes only, null pointers (nothing runs).
struct Launch {
  std::vector<int64_t> n;  // the chunk's tensors
  std::vector<int> first_block;
  int64_t blocks = 0;
};
std::vector<Launch> plan(const std::vector<int64_t>& sizes) {
  std::vector<k::SgdTensorPointers> pointers;
  for (const int64_t n : sizes) pointers.push_back({nullptr, nullptr, nullptr, n});
  std::vector<Launch> launches;
  k::for_each_sgd_chunk(pointers.data(), static_cast<int64_t>(pointers.size()),
                        [&](const k::SgdChunk& chunk, int64_t blocks) {
                          Launch launch;
                          launch.n.assign(chunk.n, chunk.n + chunk.count);
                          launch.first_block.assign(chunk.first_block,
                                                    chunk.first_block + chunk.count + 1);
                          launch.blocks = blocks;
                          launches.push_back(launch);
                        });
  return launches;
}

TEST(SgdChunking, AtMost48TensorsPerLaunchAndEmptyTensorsSkipped) {
  std::vector<int64_t> sizes;
  for (int t = 0; t < 100; ++t) sizes.push_back(t % 2 == 0 ? 0 : 4097);  // 50 real tensors
  const std::vector<Launch> launches = plan(sizes);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].n.size(), 48u);
  EXPECT_EQ(launches[1].n.size(), 2u);
  for (const Launch& launch : launches) {
    for (size_t t = 0; t < launch.n.size(); ++t) {
      EXPECT_EQ(launch.n[t], 4097);
      EXPECT_EQ(launch.first_block[t], 2 * static_cast<int>(t));  // 4097 elements: 2 blocks
    }
    EXPECT_EQ(launch.first_block.back(), launch.blocks);
    EXPECT_EQ(launch.blocks, 2 * static_cast<int64_t>(launch.n.size()));
  }
  EXPECT_TRUE(plan({0, 0, 0}).empty());
  EXPECT_TRUE(plan({}).empty());
}

TEST(SgdChunking, ALaunchNeverPassesTwoTo30Blocks) {
  const int64_t half = (k::kSgdMaxBlocksPerLaunch / 2) * k::kSgdBlockElements;
  // Two halves fill one launch exactly; the third starts the next one.
  const std::vector<Launch> launches = plan({half, half, half, 1});
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].blocks, k::kSgdMaxBlocksPerLaunch);
  EXPECT_EQ(launches[0].first_block, (std::vector<int>{0, 1 << 29, 1 << 30}));
  EXPECT_EQ(launches[1].blocks, k::kSgdMaxBlocksPerLaunch / 2 + 1);
  // One element past the limit: the tensor is cut into a launch of its own.
  const std::vector<Launch> split = plan({1, half + 1, half});
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(split[0].n, (std::vector<int64_t>{1, half + 1}));
  EXPECT_EQ(split[1].n, (std::vector<int64_t>{half}));
}

TEST(SgdChunking, ATensorTooLargeForOneLaunchIsAClearError) {
  const int64_t too_many = k::kSgdMaxBlocksPerLaunch * k::kSgdBlockElements + 1;
  const std::string message = error_message([&] { plan({5, too_many}); });
  EXPECT_NE(message.find("[sgd_step_multi] tensor 1 has too many elements"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace tandem::testing
