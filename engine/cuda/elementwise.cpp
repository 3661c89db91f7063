// Elementwise ops: unary, broadcasting binary, and the fused SGD update, one tensor or many per
// launch (kernels in elementwise.cu).

#include <vector>

#include "engine/backend/collapse_dims.h"
#include "engine/cuda/activation_type.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/on_device.h"

namespace tandem::cuda {
namespace {

kernels::SgdParams to_kernel(const SgdStepOptions& o) {
  return {o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov, o.first_step};
}

// The kernel's fixed-size copy of the output's collapsed dims (Note [Collapsing dims]): a
// same-shape op becomes one dim with strides (1, 1), the kernel's contiguous fast path.
kernels::BroadcastLayout broadcast_layout(const Shape& out, const Shape& a_strides,
                                          const Shape& b_strides) {
  const CollapsedDims dims = collapse_dims(out, {a_strides, b_strides}, "binary");
  check_collapsed_rank(dims, kernels::kMaxDims, out, "binary");
  kernels::BroadcastLayout layout;
  layout.rank = static_cast<int>(dims.rank());
  for (size_t d = 0; d < dims.rank(); ++d) {
    layout.size[d] = dims.shape[d];
    layout.a_stride[d] = dims.strides[0][d];
    layout.b_stride[d] = dims.strides[1][d];
  }
  return layout;
}

}  // namespace

void CudaBackend::unary(UnaryOp op, const Tensor& in, float scalar, Tensor& out) {
  OnDevice on(out, "unary");
  if (in.dtype() == DType::Int64) {
    TANDEM_CHECK(op == UnaryOp::AddScalar, "[unary] int64 only for add_scalar");
    kernels::add_scalar_int64(in.data<int64_t>(), static_cast<int64_t>(scalar), out.data<int64_t>(),
                              out.numel(), on.stream);
    return;
  }
  kernels::unary(op, activation_type("unary", {&in, &out}), in.data_ptr(), scalar, out.data_ptr(),
                 out.numel(), on.stream);
}

void CudaBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  OnDevice on(out, "binary");
  const bool int64_inputs = a.dtype() == DType::Int64;
  TANDEM_CHECK(a.dtype() == b.dtype() &&
                   (int64_inputs || a.dtype() == DType::Float32 || a.dtype() == DType::BFloat16),
               "[binary] inputs must both be float32 or bfloat16 (or int64 for equal), got ",
               dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  // bfloat16 in, bfloat16 out; float32 and int64 (equal) in, float32 out.
  const DType out_dtype = a.dtype() == DType::BFloat16 ? DType::BFloat16 : DType::Float32;
  TANDEM_CHECK(out.dtype() == out_dtype, "[binary] output is ", dtype_name(out.dtype()),
               ", expected ", dtype_name(out_dtype));
  const kernels::BroadcastLayout layout =
      broadcast_layout(out.shape(), broadcast_strides(a.shape(), out.shape()),
                       broadcast_strides(b.shape(), out.shape()));
  kernels::binary(op, a.dtype(), a.data_ptr(), b.data_ptr(), layout, out.data_ptr(), out.numel(),
                  on.stream);
}

void CudaBackend::sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buffer,
                           const SgdStepOptions& o) {
  OnDevice on(param, "sgd_step");
  float* buffer = o.momentum != 0.0f ? momentum_buffer.data<float>() : nullptr;
  kernels::sgd_step(param.data<float>(), grad.data<float>(), buffer, param.numel(), to_kernel(o),
                    on.stream);
}

void CudaBackend::sgd_step_multi(const std::vector<SgdTensors>& tensors, const SgdStepOptions& o) {
  if (tensors.empty()) return;
  OnDevice on(tensors[0].param, "sgd_step_multi");
  std::vector<kernels::SgdTensorPointers> pointers;
  pointers.reserve(tensors.size());
  for (const SgdTensors& t : tensors) {
    float* buffer = o.momentum != 0.0f ? t.momentum_buffer.data<float>() : nullptr;
    pointers.push_back({t.param.data<float>(), t.grad.data<float>(), buffer, t.param.numel()});
  }
  kernels::sgd_step_multi(pointers.data(), static_cast<int64_t>(pointers.size()), to_kernel(o),
                          on.stream);
}

}  // namespace tandem::cuda
