#pragma once
/// The special values of each floating storage type, as bit patterns: both zeros, the ends of the
/// subnormals and of the normals, ±1, both infinities, and NaNs of both signs (quiet, signalling,
/// with a payload, all ones). For tests of code that must treat each of them right (the ordered
/// keys of NCCL's min and max: Note [Ordered keys] in engine/cuda/kernels/ordered_keys.h).

#include <cstdint>
#include <vector>

#include "engine/half.h"

namespace tandem::testing {

template <typename T>
std::vector<uint32_t> float_specials() = delete;

template <>
inline std::vector<uint32_t> float_specials<float>() {
  return {0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x807fffffu,
          0x00800000u, 0x80800000u, 0x3f800000u, 0xbf800000u, 0x7f7fffffu, 0xff7fffffu,
          0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u,
          0x7fa12345u, 0xffa12345u, 0x7fffffffu, 0xffffffffu};
}
template <>
inline std::vector<uint32_t> float_specials<BFloat16>() {
  return {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x807f, 0x0080, 0x8080, 0x3f80, 0xbf80, 0x7f7f,
          0xff7f, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81, 0xff81, 0x7fa5, 0xffa5, 0x7fff, 0xffff};
}
template <>
inline std::vector<uint32_t> float_specials<Float16>() {
  return {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x0400, 0x8400, 0x3c00, 0xbc00, 0x7bff,
          0xfbff, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0xfc01, 0x7d23, 0xfd23, 0x7fff, 0xffff};
}

}  // namespace tandem::testing
