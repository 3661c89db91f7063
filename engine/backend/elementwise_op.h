#pragma once
/// The elementwise ops of Backend::unary and Backend::binary. Their own header, free of tensors
/// and of CUDA, because the CUDA kernel bodies take the same enums (engine/cuda/kernels/types.h):
/// one list, nothing to translate between the backend and its kernels.

namespace tandem {

enum class UnaryOp { Neg, Relu, Exp, Log, Sqrt, AddScalar, MulScalar, PowScalar };
enum class BinaryOp {
  Add,
  Sub,
  Mul,
  Div,
  Equal,         ///< 1.0 where a == b, else 0.0
  ReluBackward,  ///< a * (b > 0): a = grad of output, b = relu output
  AddRelu,       ///< max(a + b, 0): a residual block's sum and ReLU in one pass
};

}  // namespace tandem
