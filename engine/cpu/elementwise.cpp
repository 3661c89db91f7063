// Elementwise kernels: unary ops and broadcasting binary ops, plain C++ that
// the compiler vectorises, split over threads with OpenMP.

#include <cmath>

#include "engine/backend/collapse_dims.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/float_types.h"
#include "engine/cpu/parallel.h"

namespace tandem::cpu {
namespace {

constexpr int64_t kGrain = 1 << 15;

template <typename T, typename Fn>
void map_unary(const T* in, T* out, int64_t n, Fn fn) {
  parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = narrow<T>(fn(widen(in[i])));
  });
}

// In: the operands' element type; Out: the result's (float, or the bfloat16 of bfloat16
// operands). fn computes on widened values (Note [bfloat16 activations]).
template <typename In, typename Out, typename Fn>
void map_binary(const Tensor& a, const Tensor& b, Tensor& out, Fn fn) {
  const In* pa = static_cast<const In*>(a.data_ptr());
  const In* pb = static_cast<const In*>(b.data_ptr());
  Out* po = static_cast<Out*>(out.data_ptr());
  const int64_t n = out.numel();
  if (n == 0) return;
  if (a.shape() == out.shape() && b.shape() == out.shape()) {
    parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) po[i] = narrow<Out>(fn(widen(pa[i]), widen(pb[i])));
    });
    return;
  }
  // A broadcast op seen as rows of the innermost collapsed dim (Note [Collapsing dims]).
  const CollapsedDims layout = collapse_dims(
      out.shape(),
      {broadcast_strides(a.shape(), out.shape()), broadcast_strides(b.shape(), out.shape())},
      "binary");
  const Shape& a_stride = layout.strides[0];
  const Shape& b_stride = layout.strides[1];
  const int64_t rank = static_cast<int64_t>(layout.rank());
  const int64_t inner = layout.shape.back();
  const int64_t sa = a_stride.back();
  const int64_t sb = b_stride.back();
  const int64_t rows = n / inner;
  parallel_for(rows, std::max<int64_t>(1, kGrain / inner), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t remaining = row;
      int64_t oa = 0;
      int64_t ob = 0;
      for (int64_t d = rank - 2; d >= 0; --d) {
        const int64_t index = remaining % layout.shape[d];
        remaining /= layout.shape[d];
        oa += index * a_stride[d];
        ob += index * b_stride[d];
      }
      Out* o = po + row * inner;
      for (int64_t i = 0; i < inner; ++i) {
        o[i] = narrow<Out>(fn(widen(pa[oa + i * sa]), widen(pb[ob + i * sb])));
      }
    }
  });
}

// Note [NaN through ReLU and max pooling]: as in PyTorch, a NaN goes through ReLU (relu(NaN) =
// NaN, and its backward passes the gradient where the output is NaN) and wins its max-pooling
// window. `v > 0 ? v : 0` would turn it into 0, so a diverging run (most likely in bfloat16)
// could keep a finite loss while NaN weights sit behind ReLUs, and nobody would notice. The
// comparisons are written so that NaN fails them (`v < 0`, `y <= 0`); they still compile to a
// compare and a blend per vector. The CUDA bodies (engine/cuda/kernels/elementwise.h, pool.h)
// use the same forms. relu(-0) is -0, as in PyTorch on the CPU.
// Lambdas rather than functions, so that each map_binary instantiation inlines its op.
constexpr auto relu = [](float v) { return v < 0.0f ? 0.0f : v; };
constexpr auto add = [](float x, float y) { return x + y; };
constexpr auto relu_backward = [](float g, float y) { return y <= 0.0f ? 0.0f : g; };
constexpr auto add_relu = [](float x, float y) { return relu(x + y); };

// The ops that take bfloat16 (Note [bfloat16 activations]): bfloat16 operands, bfloat16 result.
void binary_bfloat16(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  switch (op) {
    case BinaryOp::Add: return map_binary<BFloat16, BFloat16>(a, b, out, add);
    case BinaryOp::AddRelu: return map_binary<BFloat16, BFloat16>(a, b, out, add_relu);
    case BinaryOp::ReluBackward: return map_binary<BFloat16, BFloat16>(a, b, out, relu_backward);
    default:
      TANDEM_FAIL(
          "[binary] has no bfloat16 kernel for this op, only add, add_relu and relu_backward");
  }
}

}  // namespace

void CpuBackend::unary(UnaryOp op, const Tensor& in, float s, Tensor& out) {
  if (in.dtype() == DType::Int64) {
    TANDEM_CHECK(op == UnaryOp::AddScalar, "[unary] int64 only for add_scalar");
    const int64_t* x = in.data<int64_t>();
    int64_t* y = out.data<int64_t>();
    const auto step = static_cast<int64_t>(s);
    for (int64_t i = 0; i < in.numel(); ++i) y[i] = x[i] + step;  // counters: a few elements
    return;
  }
  if (in.dtype() == DType::BFloat16) {
    TANDEM_CHECK(op == UnaryOp::Relu, "[unary] has no bfloat16 kernel for this op, only relu");
    check_kernel_dtypes("unary", DType::BFloat16, {&out});
    return map_unary(in.data<BFloat16>(), out.data<BFloat16>(), in.numel(), relu);
  }
  const float* x = in.data<float>();
  float* y = out.data<float>();
  const int64_t n = in.numel();
  switch (op) {
    case UnaryOp::Neg: return map_unary(x, y, n, [](float v) { return -v; });
    case UnaryOp::Relu: return map_unary(x, y, n, relu);
    case UnaryOp::Exp: return map_unary(x, y, n, [](float v) { return std::exp(v); });
    case UnaryOp::Log: return map_unary(x, y, n, [](float v) { return std::log(v); });
    case UnaryOp::Sqrt: return map_unary(x, y, n, [](float v) { return std::sqrt(v); });
    case UnaryOp::AddScalar: return map_unary(x, y, n, [s](float v) { return v + s; });
    case UnaryOp::MulScalar: return map_unary(x, y, n, [s](float v) { return v * s; });
    case UnaryOp::PowScalar: return map_unary(x, y, n, [s](float v) { return std::pow(v, s); });
  }
}

void CpuBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  if (op != BinaryOp::Equal) check_kernel_dtypes("binary", a.dtype(), {&b, &out});
  if (a.dtype() == DType::BFloat16) return binary_bfloat16(op, a, b, out);
  switch (op) {
    case BinaryOp::Add: return map_binary<float, float>(a, b, out, add);
    case BinaryOp::Sub:
      return map_binary<float, float>(a, b, out, [](float x, float y) { return x - y; });
    case BinaryOp::Mul:
      return map_binary<float, float>(a, b, out, [](float x, float y) { return x * y; });
    case BinaryOp::Div:
      return map_binary<float, float>(a, b, out, [](float x, float y) { return x / y; });
    case BinaryOp::ReluBackward: return map_binary<float, float>(a, b, out, relu_backward);
    case BinaryOp::AddRelu: return map_binary<float, float>(a, b, out, add_relu);
    case BinaryOp::Equal:
      if (a.dtype() == DType::Int64) {
        return map_binary<int64_t, float>(
            a, b, out, [](int64_t x, int64_t y) { return x == y ? 1.0f : 0.0f; });
      }
      return map_binary<float, float>(a, b, out,
                                      [](float x, float y) { return x == y ? 1.0f : 0.0f; });
  }
}

}  // namespace tandem::cpu
