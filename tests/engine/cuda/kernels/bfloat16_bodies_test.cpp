// The bfloat16 instances of the elementwise, sum and pooling bodies (Note [Element types] in
// engine/cuda/kernels/types.h) on a CPU grid, against the float32 CPU backend on the same
// bfloat16-rounded inputs (Note [bfloat16 body checks] in body_checks.h).

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/cuda/kernels/elementwise.h"
#include "engine/cuda/kernels/pool.h"
#include "engine/cuda/kernels/reduce.h"
#include "engine/cuda/kernels/reduce_layout.h"
#include "engine/tandem.h"
#include "tests/engine/cuda/kernels/body_checks.h"
#include "tests/support/cpu_block.h"
#include "tests/support/cpu_grid.h"

namespace tandem::testing {
namespace {

namespace k = cuda::kernels;

TEST(BFloat16ElementwiseBodies, ReluIsTheFloat32ResultRounded) {
  for (const int64_t n : {1, 1000, 4099}) {
    const Tensor in = rounded_to_bfloat16(random_tensor({n}, n, -3.0f, 3.0f));
    Tensor expected = empty({n});
    cpu().unary(UnaryOp::Relu, in, 0.0f, expected);
    const std::vector<BFloat16> x = to_bfloat16(in);
    for (const CpuGrid& grid : grids_for(n)) {
      std::vector<BFloat16> actual(static_cast<size_t>(n), BFloat16(-7.0f));
      run_grid_stride(k::UnaryBody<UnaryOp::Relu, BFloat16>{x.data(), 0.0f, actual.data(), n},
                      grid);
      expect_rounded_equal(actual, expected.to_vector<float>(), "relu");
    }
  }
}

template <BinaryOp kOp>
void check_binary(BinaryOp op, const std::string& what) {
  // Contiguous (same shapes) and broadcast (b one value per row of a).
  for (const bool broadcast : {false, true}) {
    const Shape a_shape{37, 53};
    const Shape b_shape = broadcast ? Shape{37, 1} : a_shape;
    const Tensor a = rounded_to_bfloat16(random_tensor(a_shape, 1));
    const Tensor b = rounded_to_bfloat16(random_tensor(b_shape, 2));
    Tensor expected = empty(a_shape);
    cpu().binary(op, a, b, expected);
    const std::vector<BFloat16> av = to_bfloat16(a), bv = to_bfloat16(b);
    const int64_t n = expected.numel();
    for (const CpuGrid& grid : grids_for(n)) {
      std::vector<BFloat16> actual(static_cast<size_t>(n), BFloat16(-7.0f));
      if (broadcast) {
        k::BroadcastLayout layout;
        layout.rank = 2;
        layout.size[0] = 37;
        layout.size[1] = 53;
        layout.a_stride[0] = 53;
        layout.a_stride[1] = 1;
        layout.b_stride[0] = 1;
        layout.b_stride[1] = 0;
        run_grid_stride(
            k::BinaryBroadcastBody<kOp, BFloat16>{av.data(), bv.data(), layout, actual.data(), n},
            grid);
      } else {
        run_grid_stride(
            k::BinaryContiguousBody<kOp, BFloat16>{av.data(), bv.data(), actual.data(), n}, grid);
      }
      expect_rounded_equal(actual, expected.to_vector<float>(),
                           what + (broadcast ? " broadcast" : ""));
    }
  }
}

TEST(BFloat16ElementwiseBodies, AddAddReluAndReluBackwardAreTheFloat32ResultRounded) {
  check_binary<BinaryOp::Add>(BinaryOp::Add, "add");
  check_binary<BinaryOp::AddRelu>(BinaryOp::AddRelu, "add_relu");
  check_binary<BinaryOp::ReluBackward>(BinaryOp::ReluBackward, "relu_backward");
}

TEST(BFloat16ElementwiseBodies, ChannelBiasAddsFloat32BiasToBFloat16Outputs) {
  const int64_t n = 3, kk = 5, pq = 7;
  const Tensor y = rounded_to_bfloat16(random_tensor({n, kk, pq}, 3));
  const Tensor bias = random_tensor({kk}, 4);
  Tensor expected = empty({n, kk, pq});
  cpu().binary(BinaryOp::Add, y, bias.view({1, kk, 1}), expected);
  for (const CpuGrid& grid : grids_for(y.numel())) {
    std::vector<BFloat16> actual = to_bfloat16(y);
    run_grid_stride(
        k::AddChannelBiasBody<BFloat16>{actual.data(), bias.data<float>(), kk, pq, y.numel()},
        grid);
    expect_rounded_equal(actual, expected.to_vector<float>(), "bias");
  }
}

// One sum per thread, and per block with splits, over the dims of a batch-norm-like layout:
// bfloat16 → bfloat16 and bfloat16 → float32 (conv2d's bias gradient).
TEST(BFloat16SumBodies, MatchTheFloat32SumOfTheRoundedInputs) {
  const Shape shape{6, 5, 9, 11};
  const std::vector<int64_t> dims{0, 2, 3};
  const Tensor in = rounded_to_bfloat16(random_tensor(shape, 5));
  Tensor expected = empty({1, 5, 1, 1});
  cpu().sum(in, dims, expected);
  const std::vector<float> reference = expected.to_vector<float>();
  const std::vector<BFloat16> x = to_bfloat16(in);
  const k::ReduceLayout layout = k::reduce_layout(shape, dims);
  for (const CpuGrid& grid : grids_for(layout.outputs)) {
    std::vector<BFloat16> narrow(5, BFloat16(-7.0f));
    run_grid_stride(
        k::SumPerThreadBody<BFloat16, BFloat16>{x.data(), layout, narrow.data(), layout.outputs},
        grid);
    expect_all_near(widened(narrow), reference, kBFloat16Tolerance, "bfloat16 sum per thread");
    std::vector<float> wide(5, -7.0f);
    run_grid_stride(
        k::SumPerThreadBody<BFloat16, float>{x.data(), layout, wide.data(), layout.outputs}, grid);
    expect_all_near(wide, reference, 1e-5, "bfloat16 into float32 sum per thread");
  }
  // Blocks of kSumBlock threads, three splits per output, partials added by SumPartialsBody.
  const int64_t splits = 3;
  const int64_t chunk = (layout.reduce_count + splits - 1) / splits;
  std::vector<double> partials(static_cast<size_t>(layout.outputs * splits), -7.0);
  std::vector<BFloat16> unused(5);
  run_blocks<double>(layout.outputs * splits, k::kSumBlock,
                     [&](CpuBlock<double>& block, int64_t b) {
                       k::sum_per_block(block, b / splits, b % splits, splits, x.data(), layout,
                                        chunk, partials.data(), unused.data());
                     });
  std::vector<BFloat16> narrow(5, BFloat16(-7.0f));
  run_grid_stride(k::SumPartialsBody<BFloat16>{partials.data(), splits, narrow.data(), 5});
  expect_all_near(widened(narrow), reference, kBFloat16Tolerance, "bfloat16 sum per block");
}

TEST(BFloat16PoolBodies, MaxPoolIsExactAndItsBackwardMatchesTheRoundedInputs) {
  k::PoolShape s{2, 3, 9, 8, 0, 0, 3, 2, 1};
  s.p = (s.h + 2 * s.padding - s.kernel) / s.stride + 1;
  s.q = (s.w + 2 * s.padding - s.kernel) / s.stride + 1;
  const Pool2dOptions options{.kernel_size = 3, .stride = 2, .padding = 1};
  const Tensor x = rounded_to_bfloat16(random_tensor({s.n, s.c, s.h, s.w}, 6));
  const Tensor grad_y = rounded_to_bfloat16(random_tensor({s.n, s.c, s.p, s.q}, 7));
  Tensor y = empty({s.n, s.c, s.p, s.q}), workspace, grad_x = empty(x.shape());
  cpu().max_pool2d_forward(x, options, y, workspace);
  cpu().max_pool2d_backward(grad_y, x, y, workspace, options, grad_x);
  const std::vector<BFloat16> xv = to_bfloat16(x), gv = to_bfloat16(grad_y);
  const int64_t outputs = y.numel(), inputs = x.numel();
  std::vector<BFloat16> actual_y(static_cast<size_t>(outputs), BFloat16(-7.0f));
  std::vector<int32_t> argmax(static_cast<size_t>(outputs), -7);
  run_grid_stride(
      k::MaxPool2dForwardBody<BFloat16>{xv.data(), s, actual_y.data(), argmax.data(), outputs});
  expect_rounded_equal(actual_y, y.to_vector<float>(), "max_pool2d");
  std::vector<BFloat16> actual_grad(static_cast<size_t>(inputs), BFloat16(-7.0f));
  run_grid_stride(
      k::MaxPool2dBackwardBody<BFloat16>{gv.data(), argmax.data(), s, actual_grad.data(), inputs},
      CpuGrid{3, 32});
  expect_all_near(widened(actual_grad), grad_x.to_vector<float>(), kBFloat16Tolerance,
                  "max_pool2d_backward");
}

TEST(BFloat16PoolBodies, AdaptiveAvgPoolMatchesTheRoundedInputs) {
  const k::PoolShape s{2, 3, 7, 5, 3, 2};
  const Tensor x = rounded_to_bfloat16(random_tensor({s.n, s.c, s.h, s.w}, 8));
  const Tensor grad_y = rounded_to_bfloat16(random_tensor({s.n, s.c, s.p, s.q}, 9));
  Tensor y = empty({s.n, s.c, s.p, s.q}), grad_x = empty(x.shape());
  cpu().adaptive_avg_pool2d_forward(x, y);
  cpu().adaptive_avg_pool2d_backward(grad_y, grad_x);
  const std::vector<BFloat16> xv = to_bfloat16(x), gv = to_bfloat16(grad_y);
  std::vector<BFloat16> actual_y(static_cast<size_t>(y.numel()));
  run_grid_stride(
      k::AdaptiveAvgPool2dForwardBody<BFloat16>{xv.data(), s, actual_y.data(), y.numel()});
  expect_all_near(widened(actual_y), y.to_vector<float>(), kBFloat16Tolerance,
                  "adaptive_avg_pool2d");
  std::vector<BFloat16> actual_grad(static_cast<size_t>(x.numel()));
  run_grid_stride(
      k::AdaptiveAvgPool2dBackwardBody<BFloat16>{gv.data(), s, actual_grad.data(), x.numel()});
  expect_all_near(widened(actual_grad), grad_x.to_vector<float>(), kBFloat16Tolerance,
                  "adaptive_avg_pool2d_backward");
}

}  // namespace
}  // namespace tandem::testing
