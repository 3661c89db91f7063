#pragma once
/// Elementwise ops with NumPy broadcasting. All differentiable ones record
/// their backward; gradients of broadcast inputs are summed back to the
/// input's shape.
///
/// add, add_relu, relu and add_ take bfloat16 as well as float32 (mixed precision's activations,
/// Note [bfloat16 activations] in engine/backend/backend.h): every operand of one call in one
/// dtype, the result in it too; a mix is an error, never a silent promotion. The others take
/// float32.

#include "engine/tensor.h"

namespace tandem {

Tensor add(const Tensor& a, const Tensor& b);
/// relu(add(a, b)) in one pass (the end of a residual block), and one pass backward.
Tensor add_relu(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, float scalar);
Tensor mul(const Tensor& a, float scalar);
Tensor neg(const Tensor& a);
Tensor relu(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor pow(const Tensor& a, float exponent);

/// 1.0 where a == b else 0.0 (float32; inputs float32 or int64). Not differentiable.
Tensor equal(const Tensor& a, const Tensor& b);

/// self += other, in place and never recorded (gradient accumulation, DP reduce-add).
Tensor& add_(Tensor& self, const Tensor& other);
/// self += scalar, in place, never recorded, on self's device without a host read: float32, or
/// int64 with a whole-number scalar (a counter such as num_batches_tracked, as PyTorch's
/// `add_(1)`).
Tensor& add_(Tensor& self, double scalar);

/// out = a * scalar, into out's memory (dense, a's shape and dtype), never recorded: DDP's
/// gradient averaging writes each gradient, scaled, into its bucket this way.
Tensor& mul_out(const Tensor& a, float scalar, Tensor& out);

/// A view of `a` with broadcast dims expanded to `shape`, materialised (differentiable).
Tensor expand(const Tensor& a, const Shape& shape);

inline Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
inline Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
inline Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
inline Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
inline Tensor operator+(const Tensor& a, float s) {
  return add(a, s);
}
inline Tensor operator-(const Tensor& a, float s) {
  return add(a, -s);
}
inline Tensor operator*(const Tensor& a, float s) {
  return mul(a, s);
}
inline Tensor operator*(float s, const Tensor& a) {
  return mul(a, s);
}
inline Tensor operator/(const Tensor& a, float s) {
  return mul(a, 1.0f / s);
}
inline Tensor operator-(const Tensor& a) {
  return neg(a);
}

}  // namespace tandem
