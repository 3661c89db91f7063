// Views, copies and device moves: the Tensor methods that build new tensors
// from an existing one. Each records its backward beside its forward.

#include "engine/autograd/node.h"
#include "engine/backend/backend.h"
#include "engine/ops/factory.h"
#include "engine/ops/layout.h"
#include "engine/profiler.h"
#include "engine/tensor_impl.h"

namespace tandem {
namespace {

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  return Tensor(std::make_shared<TensorImpl>(base.storage(), std::move(shape), std::move(strides),
                                             offset, base.dtype()));
}

// Replaces one -1 by the size that keeps numel; checks the total.
Shape infer_shape(const Shape& requested, int64_t numel, const Shape& from) {
  Shape shape = requested;
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      TANDEM_CHECK(infer_at < 0, "[view] only one dimension can be -1, got ", shape_str(requested));
      infer_at = static_cast<int>(i);
    } else {
      TANDEM_CHECK(shape[i] >= 0, "[view] invalid size in ", shape_str(requested));
      known *= shape[i];
    }
  }
  if (infer_at >= 0) {
    TANDEM_CHECK(known != 0 && numel % known == 0, "[view] cannot view ", shape_str(from), " as ",
                 shape_str(requested));
    shape[static_cast<size_t>(infer_at)] = numel / known;
  }
  TANDEM_CHECK(shape_numel(shape) == numel, "[view] cannot view ", shape_str(from), " (", numel,
               " elements) as ", shape_str(requested));
  return shape;
}

}  // namespace

Tensor Tensor::detach() const {
  return make_view(*this, shape(), strides(), offset());
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  const profiler::RecordScope scope("contiguous");
  Tensor out = empty(shape(), {.dtype = dtype(), .device = device()});
  backend_for(device()).copy(*this, out);
  autograd::record("contiguous", {this}, {&out},
                   [](const std::vector<Tensor>& grads, const std::vector<bool>&) {
                     return std::vector<Tensor>{grads[0]};
                   });
  return out;
}

Tensor Tensor::contiguous(MemoryFormat format) const {
  if (format == MemoryFormat::Contiguous) return contiguous();
  if (is_contiguous(format)) return *this;
  const profiler::RecordScope scope("contiguous");
  Tensor out = empty(shape(), {.dtype = dtype(), .device = device(), .memory_format = format});
  out.detach().copy_(*this);
  const MemoryFormat input_format = memory_format();
  autograd::record("contiguous", {this}, {&out},
                   [input_format](const std::vector<Tensor>& grads, const std::vector<bool>&) {
                     return std::vector<Tensor>{grads[0].contiguous(input_format)};
                   });
  return out;
}

Tensor Tensor::view(const Shape& requested) const {
  TANDEM_CHECK(is_contiguous(), "[view] needs a contiguous tensor (shape ", shape_str(shape()),
               "); use reshape()");
  Shape new_shape = infer_shape(requested, numel(), shape());
  Tensor out = make_view(*this, new_shape, contiguous_strides(new_shape), offset());
  const Shape input_shape = shape();
  autograd::record("view", {this}, {&out},
                   [input_shape](const std::vector<Tensor>& grads, const std::vector<bool>&) {
                     return std::vector<Tensor>{grads[0].reshape(input_shape)};
                   });
  return out;
}

Tensor Tensor::reshape(const Shape& requested) const {
  return is_contiguous() ? view(requested) : contiguous().view(requested);
}

Tensor Tensor::flatten(int64_t start_dim) const {
  TANDEM_CHECK(start_dim >= 0 && start_dim < std::max<int64_t>(dim(), 1), "[flatten] start_dim ",
               start_dim, " out of range for shape ", shape_str(shape()));
  Shape new_shape(shape().begin(), shape().begin() + start_dim);
  new_shape.push_back(-1);
  return reshape(new_shape);
}

Tensor Tensor::slice(int64_t start, int64_t end) const {
  TANDEM_CHECK(dim() >= 1, "[slice] needs at least one dimension");
  TANDEM_CHECK(0 <= start && start <= end && end <= size(0), "[slice] rows [", start, ", ", end,
               ") out of range for shape ", shape_str(shape()));
  Shape new_shape = shape();
  new_shape[0] = end - start;
  Tensor out = make_view(*this, new_shape, strides(), offset() + start * strides()[0]);
  const Shape input_shape = shape();
  const TensorOptions options = options_like(*this);
  autograd::record("slice", {this}, {&out},
                   [input_shape, options, start, end](const std::vector<Tensor>& grads,
                                                      const std::vector<bool>&) {
                     Tensor grad_input = zeros(input_shape, options);
                     grad_input.slice(start, end).copy_(grads[0]);
                     return std::vector<Tensor>{grad_input};
                   });
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  const profiler::RecordScope scope("to_device");
  TensorOptions options = options_like(*this);
  options.device = target;
  Tensor out = empty(shape(), options);
  out.detach().copy_(*this);
  const Device source = device();
  autograd::record("to", {this}, {&out},
                   [source](const std::vector<Tensor>& grads, const std::vector<bool>&) {
                     return std::vector<Tensor>{grads[0].to(source)};
                   });
  return out;
}

// Casting is elementwise, so a dense tensor is cast in its own memory order (its kernel view)
// and the result keeps the format, as PyTorch's .to(dtype) does (preserve_format).
Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  const profiler::RecordScope scope("cast");
  const MemoryFormat format = dim() == 4 ? memory_format() : MemoryFormat::Contiguous;
  const Tensor source = contiguous(format).detach();
  Tensor out = empty(shape(), {.dtype = target, .device = device(), .memory_format = format});
  Tensor out_view = ops::kernel_view(out);
  backend_for(device()).cast(ops::kernel_view(source), out_view);
  return out;
}

Tensor Tensor::clone() const {
  const profiler::RecordScope scope("clone");
  Tensor out = empty(shape(), options_like(*this));
  out.detach().copy_(*this);
  autograd::record("clone", {this}, {&out},
                   [](const std::vector<Tensor>& grads, const std::vector<bool>&) {
                     return std::vector<Tensor>{grads[0]};
                   });
  return out;
}

}  // namespace tandem
