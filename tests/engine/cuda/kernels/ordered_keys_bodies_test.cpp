// The bodies of ordered_keys.cu on a CPU grid (Note [Ordered keys] in
// engine/cuda/kernels/ordered_keys.h): keys sort like the values, with NaN beyond the infinities,
// they decode back bit for bit, and the integer max or min of keys is the max or min of the
// values with NaN propagation, against a CPU twin written with float comparisons.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/cuda/kernels/ordered_keys.h"
#include "engine/half.h"
#include "tests/support/cpu_grid.h"
#include "tests/support/float_specials.h"

namespace tandem::testing {
namespace {

namespace k = cuda::kernels;
using k::KeyReduction;

template <typename T>
using Bits = typename k::FloatBits<T>::Bits;

template <typename T>
float value_of(Bits<T> bits) {
  return static_cast<float>(k::FloatBits<T>::from(bits));
}

// The specials and, for float32, random bits; for a 16-bit type every bit pattern.
template <typename T>
std::vector<Bits<T>> patterns() {
  std::vector<Bits<T>> all;
  for (const uint32_t b : float_specials<T>()) all.push_back(static_cast<Bits<T>>(b));
  if constexpr (sizeof(Bits<T>) == 4) {
    std::mt19937_64 random(11);
    for (int i = 0; i < 4000; ++i) all.push_back(static_cast<uint32_t>(random()));
  } else {
    for (uint32_t b = 0; b < (1u << 16); ++b) all.push_back(static_cast<uint16_t>(b));
  }
  return all;
}

// The CPU twin: a before b in the values' order, -0 before +0.
template <typename T>
bool value_before(Bits<T> a, Bits<T> b) {
  const float x = value_of<T>(a), y = value_of<T>(b);
  return x < y || (x == y && std::signbit(x) && !std::signbit(y));
}

// The keys of `in` for `reduction`, made by the body on `grid`; keys past n stay untouched.
template <typename T>
std::vector<uint32_t> keys_of(const std::vector<Bits<T>>& in, KeyReduction reduction,
                              CpuGrid grid) {
  std::vector<T> values(in.size());
  for (size_t i = 0; i < in.size(); ++i) values[i] = k::FloatBits<T>::from(in[i]);
  const auto n = static_cast<int64_t>(in.size());
  std::vector<uint32_t> keys(in.size() + 1, 0xdeadbeefu);  // keys[n]: guard
  run_grid_stride(k::OrderedKeysBody<T>{values.data(), keys.data(), reduction, n}, grid);
  EXPECT_EQ(keys.back(), 0xdeadbeefu) << "wrote past n";
  keys.pop_back();
  return keys;
}

// The bits of the values of `keys`, decoded by the body on `grid`.
template <typename T>
std::vector<Bits<T>> values_of(const std::vector<uint32_t>& keys, CpuGrid grid) {
  const auto n = static_cast<int64_t>(keys.size());
  std::vector<T> out(keys.size() + 1, k::FloatBits<T>::from(0x1234));  // out[n]: guard
  run_grid_stride(k::FromOrderedKeysBody<T>{keys.data(), out.data(), n}, grid);
  EXPECT_EQ(k::FloatBits<T>::of(out.back()), 0x1234) << "wrote past n";
  std::vector<Bits<T>> bits(keys.size());
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = k::FloatBits<T>::of(out[i]);
  return bits;
}

template <typename T>
void check_order(const char* type) {
  std::vector<Bits<T>> numbers, nans;
  for (const Bits<T> b : patterns<T>()) (std::isnan(value_of<T>(b)) ? nans : numbers).push_back(b);
  std::sort(numbers.begin(), numbers.end(), value_before<T>);
  numbers.erase(std::unique(numbers.begin(), numbers.end()), numbers.end());
  ASSERT_FALSE(nans.empty());
  for (const KeyReduction reduction : {KeyReduction::Max, KeyReduction::Min}) {
    const std::string what = std::string(type) + (reduction == KeyReduction::Max ? " max" : " min");
    const std::vector<uint32_t> keys = keys_of<T>(numbers, reduction, launch_grid(1));
    for (size_t i = 1; i < keys.size(); ++i) {
      ASSERT_LT(keys[i - 1], keys[i]) << what << ": values " << value_of<T>(numbers[i - 1])
                                      << " and " << value_of<T>(numbers[i]);
    }
    for (const uint32_t key : keys_of<T>(nans, reduction, launch_grid(1))) {
      if (reduction == KeyReduction::Max) {
        ASSERT_GT(key, keys.back()) << what << ": a NaN's key is above +inf's";
      } else {
        ASSERT_LT(key, keys.front()) << what << ": a NaN's key is below -inf's";
      }
    }
  }
}

TEST(OrderedKeysBodies, SortLikeTheValuesWithEveryNanBeyondTheInfinity) {
  check_order<float>("float32");
  check_order<BFloat16>("bfloat16");
  check_order<Float16>("float16");
}

template <typename T>
void check_round_trip(const char* type) {
  const std::vector<Bits<T>> in = patterns<T>();
  for (const CpuGrid& grid : grids_for(static_cast<int64_t>(in.size()))) {
    for (const KeyReduction reduction : {KeyReduction::Max, KeyReduction::Min}) {
      const std::vector<Bits<T>> out = values_of<T>(keys_of<T>(in, reduction, grid), grid);
      for (size_t i = 0; i < in.size(); ++i) {
        const Bits<T> expected =
            std::isnan(value_of<T>(in[i])) ? k::FloatBits<T>::kQuietNan : in[i];
        ASSERT_EQ(out[i], expected)
            << type << ": bits " << in[i] << ", grid of " << grid.blocks << " × " << grid.threads;
      }
    }
  }
}

TEST(OrderedKeysBodies, DecodeToTheSameBitsAndEveryNanToTheQuietNan) {
  check_round_trip<float>("float32");
  check_round_trip<BFloat16>("bfloat16");
  check_round_trip<Float16>("float16");
}

// The CPU twin of a reduction with NaN propagation: NaN when either is, else the larger (max)
// or smaller (min) value, +0 above -0.
template <typename T>
Bits<T> reduce_twin(Bits<T> a, Bits<T> b, KeyReduction reduction) {
  if (std::isnan(value_of<T>(a)) || std::isnan(value_of<T>(b))) return k::FloatBits<T>::kQuietNan;
  const bool b_wins =
      reduction == KeyReduction::Max ? value_before<T>(a, b) : value_before<T>(b, a);
  return b_wins ? b : a;
}

// What the NCCL group does with 3 ranks' tensors of special values: keys on each rank, the
// integer max or min across ranks (ncclUint32), decoded; against the twin folded over the ranks.
template <typename T>
void check_reduction(const char* type) {
  const std::vector<uint32_t> special = float_specials<T>();
  const std::vector<Bits<T>> pool = patterns<T>();
  std::mt19937_64 random(5);
  constexpr int kRanks = 3;
  constexpr size_t n = 3000;
  // Mostly specials, so that ties, zeros of both signs and a NaN on one rank or several come up
  // often; every third element from the whole pool.
  std::vector<std::vector<Bits<T>>> ranks(kRanks, std::vector<Bits<T>>(n));
  for (auto& rank : ranks) {
    for (size_t i = 0; i < n; ++i) {
      rank[i] = i % 3 == 0 ? pool[random() % pool.size()]
                           : static_cast<Bits<T>>(special[random() % special.size()]);
    }
  }
  for (const KeyReduction reduction : {KeyReduction::Max, KeyReduction::Min}) {
    std::vector<uint32_t> reduced = keys_of<T>(ranks[0], reduction, launch_grid(n));
    std::vector<Bits<T>> expected = ranks[0];
    for (int r = 1; r < kRanks; ++r) {
      const std::vector<uint32_t> keys = keys_of<T>(ranks[r], reduction, launch_grid(n));
      for (size_t i = 0; i < n; ++i) {
        reduced[i] = reduction == KeyReduction::Max ? std::max(reduced[i], keys[i])
                                                    : std::min(reduced[i], keys[i]);
        expected[i] = reduce_twin<T>(expected[i], ranks[r][i], reduction);
      }
    }
    const std::vector<Bits<T>> actual = values_of<T>(reduced, launch_grid(n));
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(actual[i], expected[i])
          << type << (reduction == KeyReduction::Max ? " max" : " min") << ", element " << i << ": "
          << ranks[0][i] << ", " << ranks[1][i] << ", " << ranks[2][i];
    }
  }
}

TEST(OrderedKeysBodies, TheIntegerMaxAndMinOfKeysAreMaxAndMinWithNanPropagation) {
  check_reduction<float>("float32");
  check_reduction<BFloat16>("bfloat16");
  check_reduction<Float16>("float16");
}

}  // namespace
}  // namespace tandem::testing
