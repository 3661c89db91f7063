// Note [NaN in NCCL min and max]: the NCCL group's min and max of floating tensors (ordered keys,
// their integer max or min, decoded) agree with the Gloo and MPI groups' (host_reduce.h) on every
// pair of special values, on the CPU: the key kernels' bodies, run element by element, and the
// integer reduction NCCL would make. Equal as values (Gloo keeps whichever zero came first where
// the keys put +0 above -0), or both NaN.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/cuda/kernels/ordered_keys.h"
#include "engine/half.h"
#include "parallel/comm/host_reduce.h"
#include "tests/support/float_specials.h"

namespace tandem::parallel {
namespace {

namespace k = cuda::kernels;
using tandem::testing::float_specials;

template <typename T>
float value_of(T value) {
  return static_cast<float>(value);
}

// a ⊕ b as the NCCL group computes it.
template <typename T>
T through_keys(T a, T b, ReduceOp op) {
  const auto reduction = op == ReduceOp::Max ? k::KeyReduction::Max : k::KeyReduction::Min;
  uint32_t keys[2];
  const T in[2] = {a, b};
  const k::OrderedKeysBody<T> encode{in, keys, reduction, 2};
  for (int64_t i = 0; i < 2; ++i) encode(i);
  const uint32_t reduced =
      op == ReduceOp::Max ? std::max(keys[0], keys[1]) : std::min(keys[0], keys[1]);
  T out[1];
  k::FromOrderedKeysBody<T>{&reduced, out, 1}(0);
  return out[0];
}

template <typename T>
void check_against_host_reduce(DType dtype) {
  std::vector<T> values;
  for (const uint32_t bits : float_specials<T>()) {
    values.push_back(k::FloatBits<T>::from(static_cast<typename k::FloatBits<T>::Bits>(bits)));
  }
  for (const ReduceOp op : {ReduceOp::Min, ReduceOp::Max}) {
    const HostReduceFunction host = host_reduce_function(op, dtype);
    for (const T a : values) {
      for (const T b : values) {
        T expected;
        host(&expected, &a, &b, 1);
        const float want = value_of(expected), got = value_of(through_keys(a, b, op));
        EXPECT_TRUE(std::isnan(want) ? std::isnan(got) : got == want)
            << dtype_name(dtype) << " " << reduce_op_name(op) << " of " << value_of(a) << " and "
            << value_of(b) << ": host " << want << ", keys " << got;
      }
    }
  }
}

TEST(NcclMinMax, OrderedKeysAgreeWithTheHostReductionOnEveryPairOfSpecialValues) {
  check_against_host_reduce<float>(DType::Float32);
  check_against_host_reduce<BFloat16>(DType::BFloat16);
  check_against_host_reduce<Float16>(DType::Float16);
}

}  // namespace
}  // namespace tandem::parallel
