#include "engine/ops/elementwise.h"

#include <cmath>

#include "engine/autograd/node.h"
#include "engine/backend/backend.h"
#include "engine/ops/checks.h"
#include "engine/ops/factory.h"
#include "engine/ops/layout.h"
#include "engine/ops/reduce.h"
#include "engine/profiler.h"
#include "engine/tensor_impl.h"

namespace tandem {
namespace {

// `t`'s shape with leading 1s up to `rank` dims (NumPy broadcasting's view of it).
Shape unsqueezed(const Tensor& t, size_t rank) {
  Shape shape(rank - t.shape().size(), 1);
  shape.insert(shape.end(), t.shape().begin(), t.shape().end());
  return shape;
}

const char* binary_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
    case BinaryOp::Equal: return "equal";
    case BinaryOp::ReluBackward: return "relu_backward";
    case BinaryOp::AddRelu: return "add_relu";
  }
  return "binary";
}

// Whether the op takes bfloat16 operands (Note [bfloat16 activations]).
bool takes_bfloat16(BinaryOp op) {
  return op == BinaryOp::Add || op == BinaryOp::AddRelu || op == BinaryOp::ReluBackward;
}

// Runs a binary kernel on broadcast inputs; no autograd.
Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = binary_name(op);
  const profiler::RecordScope scope(name);
  ops::check_same_device(name, {&a, &b});
  if (op == BinaryOp::Equal) {
    TANDEM_CHECK(a.dtype() == b.dtype(), "[equal] dtypes differ: ", dtype_name(a.dtype()), " and ",
                 dtype_name(b.dtype()));
  } else if (takes_bfloat16(op)) {
    ops::check_float_activation(name, "a", a);
    ops::check_float_activation(name, "b", b);
    ops::check_same_dtype(name, "a", a, "b", b);
  } else {
    ops::check_dtype(name, "a", a, DType::Float32);
    ops::check_dtype(name, "b", b, DType::Float32);
  }
  // Equal gives float32 (1.0 or 0.0) whatever it compares; the others their operands' dtype.
  const DType dtype = op == BinaryOp::Equal ? DType::Float32 : a.dtype();
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  const MemoryFormat format =
      shape.size() == 4 ? ops::format_of_inputs({&a, &b}) : MemoryFormat::Contiguous;
  Tensor out = empty(shape, {.dtype = dtype, .device = a.device(), .memory_format = format});
  if (format == MemoryFormat::Contiguous) {
    backend_for(a.device()).binary(op, a.detach().contiguous(), b.detach().contiguous(), out);
    return out;
  }
  // Channels-last: broadcast in NHWC order, where every operand's view is contiguous.
  const auto nhwc_operand = [](const Tensor& t) {
    const Tensor four_d =
        t.dim() == 4 ? t.detach() : t.detach().contiguous().view(unsqueezed(t, 4));
    return ops::nhwc_view(four_d.contiguous(MemoryFormat::ChannelsLast));
  };
  Tensor out_view = ops::nhwc_view(out);
  backend_for(a.device()).binary(op, nhwc_operand(a), nhwc_operand(b), out_view);
  return out;
}

Tensor unary_kernel(UnaryOp op, const Tensor& a, float scalar, const char* name) {
  const profiler::RecordScope scope(name);
  if (op == UnaryOp::Relu) {  // the one unary op that takes bfloat16
    ops::check_float_activation(name, "input", a);
  } else {
    ops::check_dtype(name, "input", a, DType::Float32);
  }
  const Tensor input = a.detach().contiguous(a.memory_format());
  Tensor out = empty_like(input);
  Tensor out_view = ops::kernel_view(out);
  backend_for(a.device()).unary(op, ops::kernel_view(input), scalar, out_view);
  return out;
}

using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryOp::Add, a, b);
  autograd::record("add", {&a, &b}, {&out},
                   [sa = a.shape(), sb = b.shape()](const Grads& g, const Needs& needs) {
                     return Grads{needs[0] ? sum_to(g[0], sa) : Tensor(),
                                  needs[1] ? sum_to(g[0], sb) : Tensor()};
                   });
  return out;
}

Tensor add_relu(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryOp::AddRelu, a, b);
  autograd::record(
      "add_relu", {&a, &b}, {&out},
      [sa = a.shape(), sb = b.shape(), y = out.detach()](const Grads& g, const Needs& needs) {
        const Tensor grad = binary_kernel(BinaryOp::ReluBackward, g[0], y);
        return Grads{needs[0] ? sum_to(grad, sa) : Tensor(),
                     needs[1] ? sum_to(grad, sb) : Tensor()};
      });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryOp::Sub, a, b);
  autograd::record("sub", {&a, &b}, {&out},
                   [sa = a.shape(), sb = b.shape()](const Grads& g, const Needs& needs) {
                     return Grads{needs[0] ? sum_to(g[0], sa) : Tensor(),
                                  needs[1] ? sum_to(neg(g[0]), sb) : Tensor()};
                   });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryOp::Mul, a, b);
  autograd::record("mul", {&a, &b}, {&out},
                   [sa = a.detach(), sb = b.detach()](const Grads& g, const Needs& needs) {
                     return Grads{needs[0] ? sum_to(mul(g[0], sb), sa.shape()) : Tensor(),
                                  needs[1] ? sum_to(mul(g[0], sa), sb.shape()) : Tensor()};
                   });
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryOp::Div, a, b);
  autograd::record("div", {&a, &b}, {&out},
                   [sa = a.detach(), sb = b.detach()](const Grads& g, const Needs& needs) {
                     Tensor ga, gb;
                     if (needs[0]) ga = sum_to(div(g[0], sb), sa.shape());
                     if (needs[1]) gb = sum_to(neg(div(mul(g[0], sa), mul(sb, sb))), sb.shape());
                     return Grads{ga, gb};
                   });
  return out;
}

Tensor add(const Tensor& a, float scalar) {
  Tensor out = unary_kernel(UnaryOp::AddScalar, a, scalar, "add_scalar");
  autograd::record("add_scalar", {&a}, {&out},
                   [](const Grads& g, const Needs&) { return Grads{g[0]}; });
  return out;
}

Tensor mul(const Tensor& a, float scalar) {
  Tensor out = unary_kernel(UnaryOp::MulScalar, a, scalar, "mul_scalar");
  autograd::record("mul_scalar", {&a}, {&out},
                   [scalar](const Grads& g, const Needs&) { return Grads{mul(g[0], scalar)}; });
  return out;
}

Tensor neg(const Tensor& a) {
  Tensor out = unary_kernel(UnaryOp::Neg, a, 0.0f, "neg");
  autograd::record("neg", {&a}, {&out},
                   [](const Grads& g, const Needs&) { return Grads{neg(g[0])}; });
  return out;
}

Tensor relu(const Tensor& a) {
  Tensor out = unary_kernel(UnaryOp::Relu, a, 0.0f, "relu");
  autograd::record("relu", {&a}, {&out}, [y = out.detach()](const Grads& g, const Needs&) {
    return Grads{binary_kernel(BinaryOp::ReluBackward, g[0], y)};
  });
  return out;
}

Tensor exp(const Tensor& a) {
  Tensor out = unary_kernel(UnaryOp::Exp, a, 0.0f, "exp");
  autograd::record("exp", {&a}, {&out}, [y = out.detach()](const Grads& g, const Needs&) {
    return Grads{mul(g[0], y)};
  });
  return out;
}

Tensor log(const Tensor& a) {
  Tensor out = unary_kernel(UnaryOp::Log, a, 0.0f, "log");
  autograd::record("log", {&a}, {&out},
                   [x = a.detach()](const Grads& g, const Needs&) { return Grads{div(g[0], x)}; });
  return out;
}

Tensor sqrt(const Tensor& a) {
  Tensor out = unary_kernel(UnaryOp::Sqrt, a, 0.0f, "sqrt");
  autograd::record("sqrt", {&a}, {&out}, [y = out.detach()](const Grads& g, const Needs&) {
    return Grads{div(mul(g[0], 0.5f), y)};
  });
  return out;
}

Tensor pow(const Tensor& a, float exponent) {
  Tensor out = unary_kernel(UnaryOp::PowScalar, a, exponent, "pow");
  autograd::record("pow", {&a}, {&out}, [x = a.detach(), exponent](const Grads& g, const Needs&) {
    return Grads{mul(g[0], mul(pow(x, exponent - 1.0f), exponent))};
  });
  return out;
}

Tensor equal(const Tensor& a, const Tensor& b) {
  return binary_kernel(BinaryOp::Equal, a, b);
}

Tensor& add_(Tensor& self, const Tensor& other) {
  const profiler::RecordScope scope("add_");
  ops::check_same_device("add_", {&self, &other});
  // bfloat16 too: autograd accumulates the gradients of a bfloat16 activation used twice.
  ops::check_float_activation("add_", "self", self);
  ops::check_same_dtype("add_", "self", self, "other", other);
  ops::check_shape("add_", "other", other, self.shape());
  TANDEM_CHECK(self.is_dense(), "[add_] needs a contiguous or channels-last destination");
  Tensor memory = ops::kernel_view(self);
  backend_for(self.device())
      .binary(BinaryOp::Add, memory,
              ops::kernel_view(other.detach().contiguous(self.memory_format())), memory);
  return self;
}

Tensor& add_(Tensor& self, double scalar) {
  const profiler::RecordScope scope("add_scalar_");
  TANDEM_CHECK(self.dtype() == DType::Float32 || self.dtype() == DType::Int64,
               "[add_] needs a float32 or int64 tensor, got ", dtype_name(self.dtype()));
  // Backend::unary passes the scalar as a float: whole numbers are exact up to 2^24.
  constexpr double kExactInFloat = 1 << 24;
  TANDEM_CHECK(self.dtype() != DType::Int64 ||
                   (scalar == std::trunc(scalar) && std::abs(scalar) <= kExactInFloat),
               "[add_] an int64 tensor takes a whole number up to 2^24, got ", scalar);
  TANDEM_CHECK(self.is_dense(), "[add_] needs a contiguous or channels-last destination");
  Tensor memory = ops::kernel_view(self);
  backend_for(self.device()).unary(UnaryOp::AddScalar, memory, static_cast<float>(scalar), memory);
  return self;
}

Tensor& mul_out(const Tensor& a, float scalar, Tensor& out) {
  const profiler::RecordScope scope("mul_out");
  TANDEM_CHECK(a.defined() && out.defined(), "[mul_out] an undefined tensor");
  TANDEM_CHECK(a.shape() == out.shape() && a.dtype() == out.dtype() && a.device() == out.device(),
               "[mul_out] input ", shape_str(a.shape()), " ", dtype_name(a.dtype()), " on ",
               a.device(), " and output ", shape_str(out.shape()), " ", dtype_name(out.dtype()),
               " on ", out.device(), " must match");
  TANDEM_CHECK(out.is_dense(), "[mul_out] needs a contiguous or channels-last destination");
  Tensor memory = ops::kernel_view(out);
  backend_for(out.device())
      .unary(UnaryOp::MulScalar, ops::kernel_view(a.detach().contiguous(out.memory_format())),
             scalar, memory);
  return out;
}

Tensor expand(const Tensor& a, const Shape& shape) {
  const Shape target = broadcast_shapes(a.shape(), shape, "expand");
  TANDEM_CHECK(target == shape, "[expand] cannot expand ", shape_str(a.shape()), " to ",
               shape_str(shape));
  if (a.shape() == shape) return a;
  const profiler::RecordScope scope("expand");
  // A stride-0 view read by the strided copy kernel: no arithmetic, one pass.
  Shape strides(shape.size(), 0);
  const size_t lead = shape.size() - a.shape().size();
  for (size_t i = 0; i < a.shape().size(); ++i) {
    strides[lead + i] = a.shape()[i] == 1 ? 0 : a.strides()[i];
  }
  const Tensor view(
      std::make_shared<TensorImpl>(a.storage(), shape, strides, a.offset(), a.dtype()));
  Tensor out = empty(shape, {.dtype = a.dtype(), .device = a.device()});
  backend_for(a.device()).copy(view, out);
  autograd::record("expand", {&a}, {&out}, [sa = a.shape()](const Grads& g, const Needs&) {
    return Grads{sum_to(g[0], sa)};
  });
  return out;
}

}  // namespace tandem
