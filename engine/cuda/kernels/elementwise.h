#pragma once
/// Bodies of the elementwise kernels (elementwise.cu): unary ops, broadcasting binary ops and the
/// conv bias add. One template instance per op, so the op is a compile-time constant inside each
/// kernel, and per element type (Note [Element types] in types.h). Note [Kernel bodies] in
/// grid.h.

#include <cmath>
#include <cstdint>

#include "engine/cuda/kernels/types.h"
#include "engine/host_device.h"

namespace tandem::cuda::kernels {

template <UnaryOp kOp>
TANDEM_HD inline float apply_unary(float v, float s) {
  if constexpr (kOp == UnaryOp::Neg) {
    return -v;
  } else if constexpr (kOp == UnaryOp::Relu) {
    // NaN goes through (Note [NaN through ReLU and max pooling] in engine/cpu/elementwise.cpp).
    return v < 0.0f ? 0.0f : v;
  } else if constexpr (kOp == UnaryOp::Exp) {
    return expf(v);
  } else if constexpr (kOp == UnaryOp::Log) {
    return logf(v);
  } else if constexpr (kOp == UnaryOp::Sqrt) {
    return sqrtf(v);
  } else if constexpr (kOp == UnaryOp::AddScalar) {
    return v + s;
  } else if constexpr (kOp == UnaryOp::MulScalar) {
    return v * s;
  } else {
    static_assert(kOp == UnaryOp::PowScalar);
    return powf(v, s);
  }
}

template <BinaryOp kOp, typename T>
TANDEM_HD inline float apply_binary(T x, T y) {
  if constexpr (kOp == BinaryOp::Equal) {
    return x == y ? 1.0f : 0.0f;
  } else if constexpr (kOp == BinaryOp::Add) {
    return x + y;
  } else if constexpr (kOp == BinaryOp::Sub) {
    return x - y;
  } else if constexpr (kOp == BinaryOp::Mul) {
    return x * y;
  } else if constexpr (kOp == BinaryOp::Div) {
    return x / y;
  } else if constexpr (kOp == BinaryOp::ReluBackward) {
    return y <= 0.0f ? 0.0f : x;  // x: grad, y: output; a NaN output passes the gradient
  } else {
    static_assert(kOp == BinaryOp::AddRelu);
    const float sum = x + y;
    return sum < 0.0f ? 0.0f : sum;  // not fmaxf, which returns 0 for NaN
  }
}

/// in, out: (n) of T; out may alias in
template <UnaryOp kOp, typename T = float>
struct UnaryBody {
  const T* in;
  float scalar;
  T* out;
  int64_t n;
  TANDEM_HD void operator()(int64_t i) const {
    out[i] = narrow<T>(apply_unary<kOp>(widen(in[i]), scalar));
  }
};

/// out: (n) = in: (n) + scalar, int64 (a counter such as batch norm's num_batches_tracked,
/// bumped on the device so that nobody reads it on the host); out may alias in
struct AddScalarInt64Body {
  const int64_t* in;
  int64_t scalar;
  int64_t* out;
  int64_t n;
  TANDEM_HD void operator()(int64_t i) const { out[i] = in[i] + scalar; }
};

/// The output element of a binary op on T: bfloat16 for bfloat16, else float (int64 inputs are
/// Equal's, whose result is float).
template <typename T>
struct BinaryOut {
  using type = float;
};
template <>
struct BinaryOut<BFloat16> {
  using type = BFloat16;
};

/// a, b: (n) of T, out: (n), no broadcasting
template <BinaryOp kOp, typename T>
struct BinaryContiguousBody {
  using Out = typename BinaryOut<T>::type;
  const T* a;
  const T* b;
  Out* out;
  int64_t n;
  TANDEM_HD void operator()(int64_t i) const {
    out[i] = narrow<Out>(apply_binary<kOp>(widen(a[i]), widen(b[i])));
  }
};

/// out: (n) contiguous over layout.size; a and b read at their (broadcast) strides
template <BinaryOp kOp, typename T>
struct BinaryBroadcastBody {
  using Out = typename BinaryOut<T>::type;
  const T* a;
  const T* b;
  BroadcastLayout layout;
  Out* out;
  int64_t n;
  TANDEM_HD void operator()(int64_t i) const {
    int64_t remaining = i;
    int64_t offset_a = 0;
    int64_t offset_b = 0;
    for (int d = layout.rank - 1; d >= 0; --d) {
      const int64_t index = remaining % layout.size[d];
      remaining /= layout.size[d];
      offset_a += index * layout.a_stride[d];
      offset_b += index * layout.b_stride[d];
    }
    out[i] = narrow<Out>(apply_binary<kOp>(widen(a[offset_a]), widen(b[offset_b])));
  }
};

/// y: (N, K, PQ) of T += bias: (K) float32; n = N * K * PQ
template <typename T = float>
struct AddChannelBiasBody {
  T* y;
  const float* bias;
  int64_t k, pq;
  int64_t n;
  TANDEM_HD void operator()(int64_t i) const { y[i] = narrow<T>(widen(y[i]) + bias[(i / pq) % k]); }
};

}  // namespace tandem::cuda::kernels
