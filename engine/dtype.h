#pragma once
/// Element types. float32 is the compute type; int64 holds labels and indices;
/// uint8 holds raw images and opaque kernel workspaces; bfloat16 is the activation
/// type of mixed precision (Note [bfloat16 activations] in engine/backend/backend.h: the
/// activation ops take it, the rest refuse it); float16 is storage only (engine/half.h):
/// casts, copies, fills and collectives take both, so a gradient bucket can travel in
/// half the bytes.
/// The enum and the tables in dtype.cpp list every type; backends switch on it.

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/half.h"

namespace tandem {

enum class DType { Float32, Int64, UInt8, BFloat16, Float16 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);

/// Maps a C++ element type to its DType at compile time.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::Float32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::Int64;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::UInt8;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::BFloat16;
};
template <>
struct DTypeOf<Float16> {
  static constexpr DType value = DType::Float16;
};

/// Maps a DType to its C++ element type at compile time: the inverse of DTypeOf.
template <DType kDType>
struct CppType;
template <>
struct CppType<DType::Float32> {
  using type = float;
};
template <>
struct CppType<DType::Int64> {
  using type = int64_t;
};
template <>
struct CppType<DType::UInt8> {
  using type = uint8_t;
};
template <>
struct CppType<DType::BFloat16> {
  using type = BFloat16;
};
template <>
struct CppType<DType::Float16> {
  using type = Float16;
};

}  // namespace tandem
