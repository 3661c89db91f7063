#include "engine/ops/matmul.h"

#include "engine/autograd/node.h"
#include "engine/backend/backend.h"
#include "engine/ops/checks.h"
#include "engine/ops/factory.h"
#include "engine/ops/reduce.h"
#include "engine/profiler.h"

namespace tandem {
namespace {

using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

// op(a) @ op(b) into a new float32 tensor (a and b float32, or both bfloat16 with float32
// accumulation); inputs are made contiguous, no autograd.
Tensor gemm(bool transpose_a, bool transpose_b, const Tensor& a, const Tensor& b) {
  const Tensor ca = a.detach().contiguous();
  const Tensor cb = b.detach().contiguous();
  const int64_t m = transpose_a ? ca.size(1) : ca.size(0);
  const int64_t n = transpose_b ? cb.size(0) : cb.size(1);
  const int64_t k = transpose_a ? ca.size(0) : ca.size(1);
  const profiler::RecordScope scope("gemm", [&] { return 2.0 * static_cast<double>(m * n * k); });
  Tensor c = empty({m, n}, {.device = a.device()});
  backend_for(a.device()).gemm(transpose_a, transpose_b, 1.0f, ca, cb, 0.0f, c);
  return c;
}

// The gradient of one of linear's bfloat16 operands: `g` (float32, as linear's output) and the
// other operand meet in bfloat16 and the float32 product is rounded to the operand's dtype. For
// float32 operands both casts return their input.
Tensor linear_grad(bool transpose_a, bool transpose_b, const Tensor& g, const Tensor& other) {
  return gemm(transpose_a, transpose_b, g.to(other.dtype()), other).to(other.dtype());
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  const profiler::RecordScope scope("matmul");
  ops::check_dtype("matmul", "a", a, DType::Float32);
  ops::check_dtype("matmul", "b", b, DType::Float32);
  ops::check_dim("matmul", "a", a, 2);
  ops::check_dim("matmul", "b", b, 2);
  ops::check_same_device("matmul", {&a, &b});
  TANDEM_CHECK(a.size(1) == b.size(0), "[matmul] shapes ", shape_str(a.shape()), " and ",
               shape_str(b.shape()), " cannot be multiplied");
  Tensor out = gemm(false, false, a, b);
  autograd::record("matmul", {&a, &b}, {&out},
                   [sa = a.detach(), sb = b.detach()](const Grads& g, const Needs& needs) {
                     return Grads{needs[0] ? gemm(false, true, g[0], sb) : Tensor(),
                                  needs[1] ? gemm(true, false, sa, g[0]) : Tensor()};
                   });
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const profiler::RecordScope scope("linear");
  // float32, or bfloat16 input and weight giving a float32 output (Note [bfloat16 activations]:
  // the logits go to the loss, which computes in float32).
  ops::check_float_activation("linear", "input", x);
  ops::check_dtype("linear", "weight", weight, x.dtype());
  if (bias.defined()) ops::check_dtype("linear", "bias", bias, DType::Float32);
  ops::check_dim("linear", "input", x, 2);
  ops::check_dim("linear", "weight", weight, 2);
  ops::check_same_device("linear", {&x, &weight, &bias});
  TANDEM_CHECK(x.size(1) == weight.size(1), "[linear] input ", shape_str(x.shape()), " has ",
               x.size(1), " features but weight ", shape_str(weight.shape()), " expects ",
               weight.size(1));
  if (bias.defined()) ops::check_shape("linear", "bias", bias, {weight.size(0)});
  Tensor out = gemm(false, true, x, weight);
  if (bias.defined()) {
    backend_for(out.device()).binary(BinaryOp::Add, out, bias.detach().contiguous(), out);
  }
  autograd::record("linear", {&x, &weight, &bias}, {&out},
                   [sx = x.detach(), sw = weight.detach()](const Grads& g, const Needs& needs) {
                     return Grads{needs[0] ? linear_grad(false, false, g[0], sw) : Tensor(),
                                  needs[1] ? linear_grad(true, false, g[0], sx) : Tensor(),
                                  needs[2] ? sum(g[0], {0}) : Tensor()};
                   });
  return out;
}

}  // namespace tandem
