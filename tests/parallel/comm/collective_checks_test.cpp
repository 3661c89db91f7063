// The checks and reductions every backend shares (collective_checks.h, host_reduce.h), without
// any process group.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/tandem.h"
#include "parallel/comm/collective_checks.h"
#include "parallel/comm/host_reduce.h"
#include "tests/support/error_message.h"

namespace tandem::parallel {
namespace {

using tandem::testing::contains;
using tandem::testing::error_message;

constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Product, ReduceOp::Min,
                             ReduceOp::Max};

TEST(CollectiveChecks, EveryOpReducesFloatsAndAllButAvgReduceInt64) {
  for (const ReduceOp op : kOps) {
    for (const DType dtype : {DType::Float32, DType::BFloat16, DType::Float16}) {
      EXPECT_TRUE(reduce_op_supports(op, dtype)) << reduce_op_name(op) << " " << dtype_name(dtype);
    }
    EXPECT_EQ(reduce_op_supports(op, DType::Int64), op != ReduceOp::Avg) << reduce_op_name(op);
    EXPECT_FALSE(reduce_op_supports(op, DType::UInt8)) << reduce_op_name(op);
  }
}

TEST(CollectiveChecks, AnUnsupportedCombinationNamesTheOpAndTheDtype) {
  const std::string avg = error_message(
      [] { check_reduce_dtype("gloo", "reduce_scatter", 2, DType::Int64, ReduceOp::Avg); });
  EXPECT_TRUE(contains(avg,
                       "[gloo] reduce_scatter: avg does not reduce int64 tensors (tensor 2); avg "
                       "takes float32, bfloat16, float16"))
      << avg;
  const std::string bytes = error_message(
      [] { check_reduce_dtype("nccl", "allreduce", 0, DType::UInt8, ReduceOp::Max); });
  EXPECT_TRUE(contains(bytes,
                       "[nccl] allreduce: tensor 0 is uint8; supported: float32, bfloat16, "
                       "float16, int64"))
      << bytes;
  EXPECT_NO_THROW(check_reduce_dtype("gloo", "allreduce", 0, DType::Int64, ReduceOp::Product));
  EXPECT_NO_THROW(check_collective_dtype("gloo", "broadcast", 0, DType::BFloat16));
}

TEST(CollectiveChecks, DescriptionsSayWhatLinesUpAcrossRanks) {
  const ReduceOp sum = ReduceOp::Sum;
  EXPECT_EQ(
      describe_call("allreduce", {zeros({2, 4}), zeros({2}, {.dtype = DType::Int64})}, -1, &sum),
      "allreduce sum: 8 float32, 2 int64");
  EXPECT_EQ(describe_call("broadcast", {zeros({3})}, 1, nullptr), "broadcast at root 1: 3 float32");
  EXPECT_EQ(describe_call("barrier", {}, -1, nullptr), "barrier");
  // Shapes do not matter, only what is sent: [2, 4] and [8] line up.
  EXPECT_EQ(describe_call("allgather", {zeros({2, 4})}, -1, nullptr),
            describe_call("allgather", {zeros({8})}, -1, nullptr));
  EXPECT_NE(fingerprint("allreduce sum: 8 float32"), fingerprint("allreduce sum: 7 float32"));
  EXPECT_EQ(fingerprint("barrier"), fingerprint(std::string("barrier")));
}

TEST(CollectiveChecks, AMismatchNamesEveryRanksCallGroupingEqualOnes) {
  EXPECT_EQ(describe_mismatch({"barrier", "barrier", "barrier"}), "");
  const std::string message =
      describe_mismatch({"allreduce sum: 8 float32", "allreduce sum: 7 float32",
                         "allreduce sum: 8 float32", "broadcast at root 0: 8 float32"});
  EXPECT_EQ(message,
            "the ranks were not asked for the same collective, so none ran it: ranks 0 and 2: "
            "allreduce sum: 8 float32; rank 1: allreduce sum: 7 float32; rank 3: broadcast at "
            "root 0: 8 float32 (every rank must issue the same collectives in the same order, "
            "with tensors of the same sizes and dtypes)");
}

TEST(CollectiveChecks, AlltoallCountsMustPairUp) {
  // Rank r sends counts[r][0..n) and receives counts[r][n..2n).
  EXPECT_EQ(alltoall_counts_mismatch({{1, 2, 1, 3}, {3, 4, 2, 4}}), "");
  EXPECT_EQ(alltoall_counts_mismatch({{1, 2, 1, 3}, {5, 4, 2, 4}}),
            "the ranks' alltoall sizes do not match, so none ran it: rank 1 sends 5 elements to "
            "rank 0, which expects 3 from it (each rank's input part for rank s must have as many "
            "elements as rank s's output part for it)");
}

// --- host_reduce.h

template <typename T>
std::vector<T> combine(ReduceOp op, DType dtype, std::vector<T> a, const std::vector<T>& b) {
  host_reduce_function(op, dtype)(a.data(), a.data(), b.data(), a.size());
  return a;
}

TEST(HostReduce, FloatOps) {
  const std::vector<float> a = {1.5f, -2, 3}, b = {2, -4, -1};
  EXPECT_EQ(combine(ReduceOp::Sum, DType::Float32, a, b), (std::vector<float>{3.5f, -6, 2}));
  EXPECT_EQ(combine(ReduceOp::Avg, DType::Float32, a, b), (std::vector<float>{3.5f, -6, 2}));
  EXPECT_EQ(combine(ReduceOp::Product, DType::Float32, a, b), (std::vector<float>{3, 8, -3}));
  EXPECT_EQ(combine(ReduceOp::Min, DType::Float32, a, b), (std::vector<float>{1.5f, -4, -1}));
  EXPECT_EQ(combine(ReduceOp::Max, DType::Float32, a, b), (std::vector<float>{2, -2, 3}));
}

TEST(HostReduce, Int64WrapsAroundAndComparesSigned) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const std::vector<int64_t> a = {kMax, -3, 1LL << 62}, b = {1, 5, 4};
  EXPECT_EQ(combine(ReduceOp::Sum, DType::Int64, a, b),
            (std::vector<int64_t>{kMin, 2, (1LL << 62) + 4}));
  EXPECT_EQ(combine(ReduceOp::Min, DType::Int64, a, b), (std::vector<int64_t>{1, -3, 4}));
  EXPECT_EQ(combine(ReduceOp::Max, DType::Int64, a, b), (std::vector<int64_t>{kMax, 5, 1LL << 62}));
  EXPECT_EQ(combine(ReduceOp::Product, DType::Int64, a, b), (std::vector<int64_t>{kMax, -15, 0}));
  EXPECT_TRUE(contains(error_message([] { host_reduce_function(ReduceOp::Avg, DType::Int64); }),
                       "avg does not reduce int64"));
}

// Note [NaN in min and max]: NaN on either side, in every float type, as torch.maximum; -inf and
// +inf stay ordinary values.
TEST(HostReduce, MinAndMaxReturnANaNOnEitherSide) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> a = {nan, 1, nan, -inf, inf}, b = {2, nan, nan, 1, nan};
  for (const DType dtype : {DType::Float32, DType::BFloat16, DType::Float16}) {
    for (const ReduceOp op : {ReduceOp::Min, ReduceOp::Max}) {
      for (const bool swapped : {false, true}) {
        const Tensor x = from_vector<float>(swapped ? b : a, {5}).to(dtype);
        const Tensor y = from_vector<float>(swapped ? a : b, {5}).to(dtype);
        Tensor out = zeros({5}, {.dtype = dtype});
        host_reduce_function(op, dtype)(out.data_ptr(), x.data_ptr(), y.data_ptr(), 5);
        const std::vector<float> got = out.to(DType::Float32).to_vector<float>();
        for (size_t i : {0, 1, 2, 4}) {
          EXPECT_TRUE(std::isnan(got[i])) << dtype_name(dtype) << " " << reduce_op_name(op)
                                          << " element " << i << (swapped ? " swapped" : "");
        }
        EXPECT_EQ(got[3], op == ReduceOp::Min ? -inf : 1.0f) << dtype_name(dtype);
      }
    }
  }
  // Otherwise std::min and std::max, as PyTorch's Gloo: a tie keeps the first operand.
  const std::vector<float> zeros = {-0.0f}, plus_zeros = {0.0f};
  EXPECT_TRUE(std::signbit(combine(ReduceOp::Max, DType::Float32, zeros, plus_zeros)[0]));
  EXPECT_FALSE(std::signbit(combine(ReduceOp::Min, DType::Float32, plus_zeros, zeros)[0]));
}

// Note [Half all-reduce]: each step computes in float and rounds once to the 16-bit type.
TEST(HostReduce, HalfStepsRoundOncePerStep) {
  for (const DType dtype : {DType::BFloat16, DType::Float16}) {
    const Tensor a = from_vector<float>({1.0f, 3.0f, 0.1f, -7.5f}, {4}).to(dtype);
    const Tensor b = from_vector<float>({0.0078125f, 1.0f / 3, 0.2f, 2.0f}, {4}).to(dtype);
    for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max}) {
      Tensor out = zeros({4}, {.dtype = dtype});
      host_reduce_function(op, dtype)(out.data_ptr(), a.data_ptr(), b.data_ptr(), 4);
      const std::vector<float> x = a.to(DType::Float32).to_vector<float>();
      const std::vector<float> y = b.to(DType::Float32).to_vector<float>();
      std::vector<float> wide(4);
      for (size_t i = 0; i < 4; ++i) {
        wide[i] = op == ReduceOp::Sum       ? x[i] + y[i]
                  : op == ReduceOp::Product ? x[i] * y[i]
                  : op == ReduceOp::Min     ? std::min(x[i], y[i])
                                            : std::max(x[i], y[i]);
      }
      EXPECT_EQ(out.to(DType::Float32).to_vector<float>(),
                from_vector<float>(wide, {4}).to(dtype).to(DType::Float32).to_vector<float>())
          << dtype_name(dtype) << " " << reduce_op_name(op);
    }
  }
}

TEST(HostReduce, AverageScalesInFloatAndRoundsOnce) {
  Tensor sum = from_vector<float>({3, 1, -6}, {3});
  finish_average(sum, 3);
  EXPECT_EQ(sum.to_vector<float>(),
            (std::vector<float>{3 * (1.0f / 3), 1.0f / 3, -6 * (1.0f / 3)}));
  Tensor half = from_vector<float>({3, 1}, {2}).to(DType::BFloat16);
  finish_average(half, 3);
  EXPECT_EQ(half.to(DType::Float32).to_vector<float>(),
            from_vector<float>({3 * (1.0f / 3), 1.0f / 3}, {2})
                .to(DType::BFloat16)
                .to(DType::Float32)
                .to_vector<float>());
}

}  // namespace
}  // namespace tandem::parallel
