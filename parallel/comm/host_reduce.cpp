#include "parallel/comm/host_reduce.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "engine/error.h"

namespace tandem::parallel {
namespace {

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>;

// The arithmetic of one step on T: 16-bit types in float (Note [Half all-reduce]), int64 in
// uint64 so that overflow wraps instead of being undefined.
template <typename T>
using Arithmetic = std::conditional_t<kIsHalf<T>, float,
                                      std::conditional_t<std::is_same_v<T, int64_t>, uint64_t, T>>;

template <typename T, typename Combine>
HostReduceFunction elementwise(Combine combine) {
  return [combine](void* out, const void* a, const void* b, size_t n) {
    auto* result = static_cast<T*>(out);
    const auto* x = static_cast<const T*>(a);
    const auto* y = static_cast<const T*>(b);
    for (size_t i = 0; i < n; ++i) {
      result[i] = static_cast<T>(
          combine(static_cast<Arithmetic<T>>(x[i]), static_cast<Arithmetic<T>>(y[i])));
    }
  };
}

// Integers are never NaN.
template <typename C>
bool is_nan(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::isnan(x);
  } else {
    return false;
  }
}

template <typename T>
HostReduceFunction function_for(ReduceOp op) {
  // Min and max compare the values themselves (int64 as signed) and return a NaN operand on
  // either side (Note [NaN in min and max]); otherwise they are std::min and std::max, ties and
  // signed zeros included (bit-equal to PyTorch's Gloo): b when take_b(a, b), else a.
  using Compare = std::conditional_t<kIsHalf<T>, float, T>;
  const auto pick = [](auto take_b) {
    return [take_b](auto x, auto y) {
      const auto a = static_cast<Compare>(x), b = static_cast<Compare>(y);
      return take_b(a, b) || is_nan(b) ? b : a;
    };
  };
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return elementwise<T>([](auto x, auto y) { return x + y; });
    case ReduceOp::Product: return elementwise<T>([](auto x, auto y) { return x * y; });
    case ReduceOp::Min: return elementwise<T>(pick([](Compare a, Compare b) { return b < a; }));
    case ReduceOp::Max: return elementwise<T>(pick([](Compare a, Compare b) { return a < b; }));
  }
  TANDEM_FAIL("[reduce] unknown reduce op");
}

template <typename T>
void scale(const Tensor& tensor, float factor) {
  T* data = tensor.data<T>();
  for (int64_t i = 0; i < tensor.numel(); ++i) data[i] = T(static_cast<float>(data[i]) * factor);
}

}  // namespace

HostReduceFunction host_reduce_function(ReduceOp op, DType dtype) {
  TANDEM_CHECK(reduce_op_supports(op, dtype), "[reduce] ", reduce_op_name(op), " does not reduce ",
               dtype_name(dtype), " tensors");
  switch (dtype) {
    case DType::Float32: return function_for<float>(op);
    case DType::Int64: return function_for<int64_t>(op);
    case DType::BFloat16: return function_for<BFloat16>(op);
    case DType::Float16: return function_for<Float16>(op);
    case DType::UInt8: break;
  }
  TANDEM_FAIL("[reduce] no reduction for ", dtype_name(dtype));
}

void finish_average(const Tensor& sum, int size) {
  const float factor = 1.0f / static_cast<float>(size);
  switch (sum.dtype()) {
    case DType::Float32: return scale<float>(sum, factor);
    case DType::BFloat16: return scale<BFloat16>(sum, factor);
    case DType::Float16: return scale<Float16>(sum, factor);
    case DType::Int64:
    case DType::UInt8: break;
  }
  TANDEM_FAIL("[reduce] avg of ", dtype_name(sum.dtype()), " tensors");
}

}  // namespace tandem::parallel
