#pragma once
/// Bodies of the ordered-key kernels (ordered_keys.cu): floating values as unsigned integers in
/// the same order. Note [Kernel bodies] in grid.h.
///
/// Note [Ordered keys]: NCCL's ncclMax and ncclMin on floats are fmaxf/fminf and __hmax/__hmin,
/// which drop a NaN; its integer max and min drop nothing. So a min or max that must keep a NaN
/// (Note [NaN in min and max] in parallel/comm/host_reduce.h) reduces keys instead:
/// - a value's key is its bits with the sign bit set when it is positive, and all bits flipped
///   when it is negative: -inf < ... < -0 < +0 < ... < +inf in the value is the same order as
///   unsigned integers in the key (a sign-magnitude number made two's-complement-like, then
///   offset);
/// - a NaN, whatever its sign and payload, first becomes the quiet NaN of the sign that puts its
///   key beyond every other: +NaN (key above +inf's) for max, -NaN (below -inf's) for min, so the
///   extreme of any set of keys that holds a NaN is that NaN's key;
/// - 16-bit types get 32-bit keys (their 16-bit key, zero-extended): NCCL has no 16-bit unsigned
///   type, and a pair of 16-bit keys in one 32-bit word would not be compared element-wise;
/// - decoding inverts the map and returns every NaN as the quiet NaN kQuietNan (positive), the
///   same bits for min and max; the payload and sign of the NaN that came in are lost.
/// The result is exactly max or min (with -0 < +0, like totalOrder) wherever no NaN is involved,
/// and kQuietNan wherever one is, on every rank, whichever rank held it.

#include <cstdint>

#include "engine/half.h"
#include "engine/host_device.h"

namespace tandem::cuda::kernels {

/// The reduction the keys are made for: a NaN becomes the key that wins it.
enum class KeyReduction { Max, Min };

/// The bit patterns of a floating storage type that its keys need.
template <typename T>
struct FloatBits;
template <>
struct FloatBits<float> {
  using Bits = uint32_t;
  static constexpr Bits kInfinity = 0x7f800000u;  ///< +inf; a larger magnitude is a NaN
  static constexpr Bits kQuietNan = 0x7fc00000u;
  TANDEM_HD static Bits of(float value) { return half_detail::float_bits(value); }
  TANDEM_HD static float from(Bits bits) { return half_detail::float_from_bits(bits); }
};
template <>
struct FloatBits<BFloat16> {
  using Bits = uint16_t;
  static constexpr Bits kInfinity = 0x7f80u;
  static constexpr Bits kQuietNan = 0x7fc0u;
  TANDEM_HD static Bits of(BFloat16 value) { return value.bits; }
  TANDEM_HD static BFloat16 from(Bits bits) { return BFloat16::from_bits(bits); }
};
template <>
struct FloatBits<Float16> {
  using Bits = uint16_t;
  static constexpr Bits kInfinity = 0x7c00u;
  static constexpr Bits kQuietNan = 0x7e00u;
  TANDEM_HD static Bits of(Float16 value) { return value.bits; }
  TANDEM_HD static Float16 from(Bits bits) { return Float16::from_bits(bits); }
};

template <typename Bits>
constexpr Bits kSignBit = static_cast<Bits>(Bits{1} << (8 * sizeof(Bits) - 1));

template <typename T>
TANDEM_HD inline bool is_nan_bits(typename FloatBits<T>::Bits bits) {
  using Bits = typename FloatBits<T>::Bits;
  return static_cast<Bits>(bits & ~kSignBit<Bits>) > FloatBits<T>::kInfinity;
}

/// The key of a value of T given by its bits (Note [Ordered keys]).
template <typename T>
TANDEM_HD inline uint32_t ordered_key(typename FloatBits<T>::Bits bits, KeyReduction reduction) {
  using Bits = typename FloatBits<T>::Bits;
  constexpr Bits sign = kSignBit<Bits>;
  if (is_nan_bits<T>(bits)) {
    bits = reduction == KeyReduction::Max ? FloatBits<T>::kQuietNan
                                          : static_cast<Bits>(FloatBits<T>::kQuietNan | sign);
  }
  return (bits & sign) != 0 ? static_cast<Bits>(~bits) : static_cast<Bits>(bits | sign);
}

/// The bits of the value whose key is `key`; every NaN comes back as kQuietNan.
template <typename T>
TANDEM_HD inline typename FloatBits<T>::Bits bits_of_key(uint32_t key) {
  using Bits = typename FloatBits<T>::Bits;
  constexpr Bits sign = kSignBit<Bits>;
  const auto k = static_cast<Bits>(key);  // a 16-bit type's key is in the low half
  const Bits bits = (k & sign) != 0 ? static_cast<Bits>(k & ~sign) : static_cast<Bits>(~k);
  return is_nan_bits<T>(bits) ? FloatBits<T>::kQuietNan : bits;
}

/// in: (n) of T → keys: (n) uint32, their ordered keys for `reduction`
template <typename T>
struct OrderedKeysBody {
  const T* in;
  uint32_t* keys;
  KeyReduction reduction;
  int64_t n;
  TANDEM_HD void operator()(int64_t i) const {
    keys[i] = ordered_key<T>(FloatBits<T>::of(in[i]), reduction);
  }
};

/// keys: (n) uint32 → out: (n) of T, the values they are the keys of
template <typename T>
struct FromOrderedKeysBody {
  const uint32_t* keys;
  T* out;
  int64_t n;
  TANDEM_HD void operator()(int64_t i) const {
    out[i] = FloatBits<T>::from(bits_of_key<T>(keys[i]));
  }
};

}  // namespace tandem::cuda::kernels
