#pragma once
/// Element types. float32 is the compute type; int64 holds labels and indices;
/// uint8 holds raw images and opaque kernel workspaces. bf16/fp16 slot in here
/// when mixed precision arrives (the enum and the tables below are the only
/// places that list types).

#include <cstddef>
#include <cstdint>
#include <string>

namespace tandem {

enum class DType { Float32, Int64, UInt8 };

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

}  // namespace tandem
