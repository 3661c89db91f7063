// Memory kernels: strided copy, fill and dtype casts.

#include <cstring>

#include "engine/backend/collapse_dims.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/parallel.h"

namespace tandem::cpu {
namespace {

// Gathers a strided tensor into contiguous memory, one innermost row of its collapsed dims
// (Note [Collapsing dims]) at a time.
template <typename T>
void copy_strided(const T* src, const Shape& shape, const Shape& strides, T* dst) {
  const CollapsedDims dims = collapse_dims(shape, {strides}, "copy");
  const Shape& stride = dims.strides[0];
  const int64_t rank = static_cast<int64_t>(dims.rank());
  const int64_t inner = dims.shape.back();
  const int64_t inner_stride = stride.back();
  const int64_t rows = shape_numel(dims.shape) / std::max<int64_t>(inner, 1);
  parallel_for(rows, 256, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      // Offset of this row: unravel the row index over the outer dims.
      int64_t remaining = row;
      int64_t offset = 0;
      for (int64_t d = rank - 2; d >= 0; --d) {
        offset += (remaining % dims.shape[d]) * stride[d];
        remaining /= dims.shape[d];
      }
      const T* in = src + offset;
      T* out = dst + row * inner;
      if (inner_stride == 1) {
        std::memcpy(out, in, static_cast<size_t>(inner) * sizeof(T));
      } else {
        for (int64_t i = 0; i < inner; ++i) out[i] = in[i * inner_stride];
      }
    }
  });
}

// A half type narrows `value` through float (its constructor takes a float): a double that rounds
// onto a 16-bit tie in float may then round the other way, far below what fills are used for.
template <typename T>
void fill_typed(Tensor& dst, double value) {
  T* data = static_cast<T*>(dst.data_ptr());
  const T v = static_cast<T>(value);
  parallel_for(dst.numel(), 1 << 16,
               [&](int64_t begin, int64_t end) { std::fill(data + begin, data + end, v); });
}

// A half type converts through float both ways (its explicit constructor from float, its
// conversion to float), so half <-> int64/uint8 is int -> float -> half and half -> float -> int.
template <typename From, typename To>
void cast_typed(const Tensor& src, Tensor& dst) {
  const From* in = static_cast<const From*>(src.data_ptr());
  To* out = static_cast<To*>(dst.data_ptr());
  parallel_for(src.numel(), 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = static_cast<To>(in[i]);
  });
}

template <typename From>
void cast_from(const Tensor& src, Tensor& dst) {
  switch (dst.dtype()) {
    case DType::Float32: return cast_typed<From, float>(src, dst);
    case DType::Int64: return cast_typed<From, int64_t>(src, dst);
    case DType::UInt8: return cast_typed<From, uint8_t>(src, dst);
    case DType::BFloat16: return cast_typed<From, BFloat16>(src, dst);
    case DType::Float16: return cast_typed<From, Float16>(src, dst);
  }
}

}  // namespace

void CpuBackend::copy(const Tensor& src, Tensor& dst) {
  TANDEM_CHECK(src.device().is_cpu() && dst.device().is_cpu(), "[copy] CPU backend got ",
               src.device(), " -> ", dst.device());
  TANDEM_CHECK(dst.is_contiguous() && src.numel() == dst.numel() && src.dtype() == dst.dtype(),
               "[copy] needs a contiguous destination of the same size and dtype");
  if (src.numel() == 0) return;
  if (src.is_contiguous()) {
    std::memcpy(dst.data_ptr(), src.data_ptr(), src.nbytes());
    return;
  }
  switch (dtype_size(src.dtype())) {
    case 1:
      return copy_strided(static_cast<const uint8_t*>(src.data_ptr()), src.shape(), src.strides(),
                          static_cast<uint8_t*>(dst.data_ptr()));
    case 2:
      return copy_strided(static_cast<const uint16_t*>(src.data_ptr()), src.shape(), src.strides(),
                          static_cast<uint16_t*>(dst.data_ptr()));
    case 4:
      return copy_strided(static_cast<const uint32_t*>(src.data_ptr()), src.shape(), src.strides(),
                          static_cast<uint32_t*>(dst.data_ptr()));
    case 8:
      return copy_strided(static_cast<const uint64_t*>(src.data_ptr()), src.shape(), src.strides(),
                          static_cast<uint64_t*>(dst.data_ptr()));
    default: TANDEM_FAIL("[copy] unsupported element size ", dtype_size(src.dtype()));
  }
}

void CpuBackend::fill(Tensor& dst, double value) {
  switch (dst.dtype()) {
    case DType::Float32: return fill_typed<float>(dst, value);
    case DType::Int64: return fill_typed<int64_t>(dst, value);
    case DType::UInt8: return fill_typed<uint8_t>(dst, value);
    case DType::BFloat16: return fill_typed<BFloat16>(dst, value);
    case DType::Float16: return fill_typed<Float16>(dst, value);
  }
}

void CpuBackend::cast(const Tensor& src, Tensor& dst) {
  switch (src.dtype()) {
    case DType::Float32: return cast_from<float>(src, dst);
    case DType::Int64: return cast_from<int64_t>(src, dst);
    case DType::UInt8: return cast_from<uint8_t>(src, dst);
    case DType::BFloat16: return cast_from<BFloat16>(src, dst);
    case DType::Float16: return cast_from<Float16>(src, dst);
  }
}

CpuBackend& backend() {
  static CpuBackend instance;
  return instance;
}

}  // namespace tandem::cpu
