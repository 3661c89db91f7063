#pragma once
/// 16-bit floating storage types: BFloat16 (float32's 8-bit exponent, 8 significant bits) and
/// Float16 (IEEE 754 binary16: 5-bit exponent, 11 significant bits). They exist to halve the bytes
/// a collective moves (DDP gradient compression); nothing computes in them. A value is widened to
/// float to compute on and narrowed back with one rounding, on the host and in CUDA kernels alike.
///
/// Note [Half conversions]: float → 16 bits rounds to nearest, ties to even (what PyTorch and the
/// hardware do); NaN stays NaN, made quiet, sign kept; a value past the largest finite one becomes
/// ±inf; float16 subnormals are rounded exactly; -0 keeps its sign. 16 bits → float is exact (a
/// float16 NaN comes out quiet, as x86's F16C makes it). All of it is integer arithmetic on the
/// bits, so neither the FP environment nor a device's flush-to-zero mode can change a result, and
/// host and device agree bit for bit.

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "engine/host_device.h"

namespace tandem {
namespace half_detail {

// memcpy is the punning that is defined behaviour and compiles for both host and device.
TANDEM_HD inline uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

TANDEM_HD inline float float_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

TANDEM_HD inline uint16_t float_to_bfloat16_bits(float value) {
  const uint32_t bits = float_bits(value);
  // Truncating a NaN's payload could leave zeros, i.e. infinity: set the quiet bit instead.
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Just under half a bfloat16 ulp, plus the parity of the last kept bit, rounds ties to even;
  // a carry runs into the exponent, up to infinity for values past the largest finite one.
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

TANDEM_HD inline float bfloat16_bits_to_float(uint16_t bits) {
  return float_from_bits(static_cast<uint32_t>(bits) << 16);
}

// |value| in [2^-14, 65520): rebias the exponent (127 → 15) and round away 13 mantissa bits to
// nearest even; a carry out of the mantissa bumps the exponent, as it should.
TANDEM_HD inline uint16_t float16_normal_bits(uint32_t magnitude) {
  const uint32_t rebiased = magnitude - (112u << 23);
  return static_cast<uint16_t>((rebiased + 0x0fffu + ((rebiased >> 13) & 1u)) >> 13);
}

// |value| in (2^-25, 2^-14): a count of float16's smallest subnormal 2^-24, rounded to nearest
// even. value = significand * 2^(exponent - 150), so the count is significand >> (126 - exponent).
// The result may be 0x400, the smallest normal, which is the right bit pattern for it.
TANDEM_HD inline uint16_t float16_subnormal_bits(uint32_t magnitude) {
  const uint32_t exponent = magnitude >> 23;  // 102..112 in this range
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exponent;  // 14..24
  const uint32_t kept = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  const bool round_up = rest > half || (rest == half && (kept & 1u) != 0);
  return static_cast<uint16_t>(kept + (round_up ? 1u : 0u));
}

TANDEM_HD inline uint16_t float_to_float16_bits(float value) {
  const uint32_t bits = float_bits(value);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {  // NaN: quiet bit set, top of the payload kept
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  // 65520 lies halfway between 65504 (the largest finite, odd) and 65536: the tie goes to inf.
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude >= 0x38800000u) return static_cast<uint16_t>(sign | float16_normal_bits(magnitude));
  // 2^-25 lies halfway between 0 (even) and 2^-24: it and everything below round to ±0.
  if (magnitude <= 0x33000000u) return sign;
  return static_cast<uint16_t>(sign | float16_subnormal_bits(magnitude));
}

TANDEM_HD inline float float16_bits_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) {  // inf, or NaN
    const uint32_t quiet = mantissa != 0 ? 0x400000u : 0u;
    return float_from_bits(sign | 0x7f800000u | quiet | (mantissa << 13));
  }
  if (exponent != 0) return float_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return float_from_bits(sign);
  // A subnormal, mantissa * 2^-24: float has the range to store it normalised, with the leading
  // 1 moved to the implicit bit (bit 10 here), one exponent step per shift.
  uint32_t shifts = 0;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    ++shifts;
  }
  return float_from_bits(sign | ((113u - shifts) << 23) | ((mantissa & 0x3ffu) << 13));
}

}  // namespace half_detail

/// bfloat16: the top half of a float32. Same range as float32, about 3 significant digits.
struct BFloat16 {
  uint16_t bits;

  BFloat16() = default;
  /// Rounds to nearest even (Note [Half conversions]).
  TANDEM_HD explicit BFloat16(float value) : bits(half_detail::float_to_bfloat16_bits(value)) {}
  /// Exact.
  TANDEM_HD operator float() const { return half_detail::bfloat16_bits_to_float(bits); }
  TANDEM_HD static BFloat16 from_bits(uint16_t bits) {
    BFloat16 value;
    value.bits = bits;
    return value;
  }
};

/// IEEE 754 float16: largest finite 65504, smallest normal 2^-14, smallest subnormal 2^-24.
struct Float16 {
  uint16_t bits;

  Float16() = default;
  /// Rounds to nearest even (Note [Half conversions]).
  TANDEM_HD explicit Float16(float value) : bits(half_detail::float_to_float16_bits(value)) {}
  /// Exact.
  TANDEM_HD operator float() const { return half_detail::float16_bits_to_float(bits); }
  TANDEM_HD static Float16 from_bits(uint16_t bits) {
    Float16 value;
    value.bits = bits;
    return value;
  }
};

// Tensors hold them as raw 2-byte elements, copied with memcpy.
static_assert(sizeof(BFloat16) == 2 && std::is_trivially_copyable_v<BFloat16>);
static_assert(sizeof(Float16) == 2 && std::is_trivially_copyable_v<Float16>);

}  // namespace tandem
