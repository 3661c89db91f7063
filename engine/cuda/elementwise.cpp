// Elementwise ops: unary, broadcasting binary, and the fused SGD update, one tensor or many per
// launch (kernels in elementwise.cu).

#include <vector>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/on_device.h"

namespace tandem::cuda {
namespace {

kernels::SgdParams to_kernel(const SgdStepOptions& o) {
  return {o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov, o.first_step};
}

kernels::Unary to_kernel(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: return kernels::Unary::Neg;
    case UnaryOp::Relu: return kernels::Unary::Relu;
    case UnaryOp::Exp: return kernels::Unary::Exp;
    case UnaryOp::Log: return kernels::Unary::Log;
    case UnaryOp::Sqrt: return kernels::Unary::Sqrt;
    case UnaryOp::AddScalar: return kernels::Unary::AddScalar;
    case UnaryOp::MulScalar: return kernels::Unary::MulScalar;
    case UnaryOp::PowScalar: return kernels::Unary::PowScalar;
  }
  TANDEM_FAIL("[unary] unknown op");
}

kernels::Binary to_kernel(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return kernels::Binary::Add;
    case BinaryOp::Sub: return kernels::Binary::Sub;
    case BinaryOp::Mul: return kernels::Binary::Mul;
    case BinaryOp::Div: return kernels::Binary::Div;
    case BinaryOp::Equal: return kernels::Binary::Equal;
    case BinaryOp::ReluBackward: return kernels::Binary::ReluBackward;
    case BinaryOp::AddRelu: return kernels::Binary::AddRelu;
  }
  TANDEM_FAIL("[binary] unknown op");
}

// The output's dims without the size-1 ones, merged where both inputs stay contiguous across
// the boundary (as the CPU kernel does): a same-shape op becomes one dim with strides (1, 1).
kernels::BroadcastLayout broadcast_layout(const Shape& out, const Shape& a_strides,
                                          const Shape& b_strides) {
  kernels::BroadcastLayout layout;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 1) continue;
    const int last = layout.rank - 1;
    if (last >= 0 && layout.a_stride[last] == a_strides[i] * out[i] &&
        layout.b_stride[last] == b_strides[i] * out[i]) {
      layout.size[last] *= out[i];
      layout.a_stride[last] = a_strides[i];
      layout.b_stride[last] = b_strides[i];
      continue;
    }
    TANDEM_CHECK(layout.rank < kernels::kMaxDims, "[binary] more than ", kernels::kMaxDims,
                 " non-mergeable dims are not supported (shape ", shape_str(out), ")");
    layout.size[layout.rank] = out[i];
    layout.a_stride[layout.rank] = a_strides[i];
    layout.b_stride[layout.rank] = b_strides[i];
    ++layout.rank;
  }
  if (layout.rank == 0) {  // a single element
    layout.rank = 1;
    layout.size[0] = 1;
    layout.a_stride[0] = 1;
    layout.b_stride[0] = 1;
  }
  return layout;
}

}  // namespace

void CudaBackend::unary(UnaryOp op, const Tensor& in, float scalar, Tensor& out) {
  OnDevice on(out, "unary");
  kernels::unary(to_kernel(op), in.data<float>(), scalar, out.data<float>(), out.numel(),
                 on.stream);
}

void CudaBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  OnDevice on(out, "binary");
  const bool int64_inputs = a.dtype() == DType::Int64;
  TANDEM_CHECK(a.dtype() == b.dtype() && (int64_inputs || a.dtype() == DType::Float32),
               "[binary] inputs must both be float32 (or int64 for equal), got ",
               dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  const kernels::BroadcastLayout layout =
      broadcast_layout(out.shape(), broadcast_strides(a.shape(), out.shape()),
                       broadcast_strides(b.shape(), out.shape()));
  kernels::binary(to_kernel(op), a.data_ptr(), b.data_ptr(), int64_inputs, layout,
                  out.data<float>(), out.numel(), on.stream);
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
