#pragma once
/// The plain argument structs of Tandem's own CUDA kernels (engine/cuda/kernels/launch.h launches
/// them). No CUDA include: the kernel bodies in this folder and their CPU tests use them too.

#include <cstdint>

#include "engine/backend/elementwise_op.h"
#include "engine/dtype.h"
#include "engine/half.h"
#include "engine/host_device.h"

namespace tandem::cuda::kernels {

constexpr int kMaxDims = 8;

/// A strided view: `rank` dims of (size, stride in elements), outermost first.
struct StridedLayout {
  int rank = 0;
  int64_t size[kMaxDims] = {};
  int64_t stride[kMaxDims] = {};
};

/// The offset in elements of the index-th element (row-major over layout.size) of `layout`.
TANDEM_HD inline int64_t offset_of(int64_t index, const StridedLayout& layout) {
  int64_t offset = 0;
  for (int d = layout.rank - 1; d >= 0; --d) {
    offset += (index % layout.size[d]) * layout.stride[d];
    index /= layout.size[d];
  }
  return offset;
}

/// The kernels take the engine's own enums (DType, UnaryOp, BinaryOp: engine/dtype.h,
/// engine/backend/elementwise_op.h) under their own names, so the backend passes a tensor's dtype
/// and its op as they are. BFloat16 and Float16 are engine/half.h's types: casts widen them to
/// float or round to them (Note [Half conversions]), bit for bit as the CPU backend does.

/// Note [Element types]: the kernels of Note [bfloat16 activations] (engine/backend/backend.h) are
/// templates on their element type T, float or BFloat16, with one body for both: each element
/// is widened to float on load and rounded once on store (engine/half.h), and every sum is
/// accumulated in float or wider. For T = float widen() and narrow() are the identity, so the
/// float32 kernels compute exactly what they did before the template.
TANDEM_HD inline float widen(float value) {
  return value;
}
TANDEM_HD inline float widen(BFloat16 value) {
  return static_cast<float>(value);
}
TANDEM_HD inline int64_t widen(int64_t value) {
  return value;
}
template <typename T>
TANDEM_HD inline T narrow(float value) {
  return T(value);
}

/// A broadcast binary op: out is contiguous with `size`; a and b are read at their strides,
/// 0 along the dims where they are broadcast.
struct BroadcastLayout {
  int rank = 0;
  int64_t size[kMaxDims] = {};
  int64_t a_stride[kMaxDims] = {};
  int64_t b_stride[kMaxDims] = {};
};

struct SgdParams {
  float lr, momentum, dampening, weight_decay;
  bool nesterov, first_step;
};
/// One tensor of sgd_step_multi: param, grad, momentum_buffer: (n); momentum_buffer is null
/// when momentum is 0.
struct SgdTensorPointers {
  float* param;
  const float* grad;
  float* momentum_buffer;
  int64_t n;
};

/// A sum over some dims of a contiguous input: the `kept` dims index the outputs (row-major),
/// the `reduced` dims are summed; both as (size, stride in elements), outermost first.
struct ReduceLayout {
  StridedLayout kept;
  StridedLayout reduced;
  int64_t outputs = 1;       ///< product of the kept sizes
  int64_t reduce_count = 1;  ///< product of the reduced sizes (> 0)
};

/// Input (N, C, H, W), output (N, C, P, Q); kernel, stride, padding for max pooling only.
struct PoolShape {
  int64_t n, c, h, w, p, q;
  int64_t kernel = 1, stride = 1, padding = 0;
};

/// Batch norm's (N, C, HW): statistics per channel c over the N * HW values of that channel.
struct NormShape {
  int64_t n, c, hw;
};

/// The running statistics a training batch norm updates in place (Note [Running statistics] in
/// engine/running_statistics.h): mean and var (C) float32, both null when there are none.
struct RunningStatisticsPointers {
  float* mean = nullptr;
  float* var = nullptr;
  float momentum = 0.0f;
};

}  // namespace tandem::cuda::kernels
