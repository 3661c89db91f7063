#pragma once
/// The element types of the CPU activation kernels (Note [bfloat16 activations] in
/// engine/backend/backend.h). Each such kernel is written once, templated on T = float or BFloat16:
/// it loads with widen() and stores with narrow<T>(), so its float instantiation is the float32
/// kernel as it was (both are the identity) and its bfloat16 one computes in float32 and rounds
/// each stored element once (Note [Half conversions]). Both conversions are integer arithmetic
/// without branches that GCC vectorises (a 16-lane shift to widen; add, shift and a select for
/// NaN to narrow).

#include <initializer_list>

#include "engine/cpu/cpu_backend.h"
#include "engine/half.h"
#include "engine/ops/factory.h"
#include "engine/tensor.h"

namespace tandem::cpu {

/// float and integer types: the value as it is.
template <typename T>
inline T widen(T value) {
  return value;
}
/// Exact.
inline float widen(BFloat16 value) {
  return half_detail::bfloat16_bits_to_float(value.bits);
}

template <typename T>
inline T narrow(float value) {
  return value;
}
/// Rounds to nearest even: half_detail::float_to_bfloat16_bits bit for bit (a test checks), with
/// the NaN test as a float compare, one vector instruction where the integer one takes two. The
/// project compiles without -ffinite-math-only, which would fold it away.
template <>
inline BFloat16 narrow<BFloat16>(float value) {
  const uint32_t bits = half_detail::float_bits(value);
  const uint32_t high = bits >> 16;
  const uint32_t rounded = (bits + 0x7fffu + (high & 1u)) >> 16;
  return BFloat16::from_bits(static_cast<uint16_t>(value != value ? high | 0x40u : rounded));
}

/// Calls fn(T{}) with T the element type of `dtype`, float or BFloat16; any other dtype throws,
/// naming the kernel.
template <typename Fn>
decltype(auto) dispatch_float_types(DType dtype, const char* kernel, Fn&& fn) {
  if (dtype == DType::BFloat16) return fn(BFloat16{});
  TANDEM_CHECK(dtype == DType::Float32, "[", kernel, "] has no ", dtype_name(dtype), " kernel");
  return fn(float{});
}

/// Throws unless every defined tensor is of `dtype`: a kernel reads its operands' memory as one
/// element type, so a mismatch must not get that far.
inline void check_kernel_dtypes(const char* kernel, DType dtype,
                                std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    if (t == nullptr || !t->defined()) continue;
    TANDEM_CHECK(t->dtype() == dtype, "[", kernel, "] operands are ", dtype_name(dtype), " and ",
                 dtype_name(t->dtype()), "; one dtype expected");
  }
}

/// An uninitialised float32 tensor of t's shape, device and memory format.
inline Tensor float_like(const Tensor& t) {
  return empty(t.shape(), {.device = t.device(), .memory_format = t.memory_format()});
}

/// A float32 copy of `t` in its memory format: how the oneDNN-backed kernels (NCHW batch norm,
/// max pooling) take bfloat16, running their float32 primitive on it. Exact, and free of
/// oneDNN 2.6's bfloat16 primitives, which need AVX-512 and would change the float32 arithmetic
/// the results are held to; those are not the hot paths (channels-last batch norm is).
inline Tensor widened(const Tensor& t) {
  Tensor out = float_like(t);
  backend().cast(t, out);
  return out;
}

/// dst = src rounded to dst's dtype; both dense, of one shape and memory format.
inline void narrow_into(const Tensor& src, Tensor& dst) {
  backend().cast(src, dst);
}

}  // namespace tandem::cpu
