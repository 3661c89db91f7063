#include "engine/ops/layout.h"

#include "engine/backend/backend.h"
#include "engine/tensor_impl.h"

namespace tandem::ops {

Tensor nhwc_view(const Tensor& t) {
  TANDEM_CHECK(t.dim() == 4, "[nhwc_view] needs a 4-D tensor, got shape ", shape_str(t.shape()));
  const Shape& n = t.shape();
  const Shape& s = t.strides();
  return Tensor(std::make_shared<TensorImpl>(t.storage(), Shape{n[0], n[2], n[3], n[1]},
                                             Shape{s[0], s[2], s[3], s[1]}, t.offset(), t.dtype()));
}

Tensor kernel_view(const Tensor& t) {
  if (t.is_contiguous()) return t;
  TANDEM_CHECK(t.is_contiguous(MemoryFormat::ChannelsLast),
               "[kernel_view] needs a dense tensor, got strides ", shape_str(t.strides()),
               " for shape ", shape_str(t.shape()));
  return nhwc_view(t);
}

Tensor dense_view(const Tensor& flat, const Shape& shape, MemoryFormat format) {
  TANDEM_CHECK(flat.dim() == 1 && flat.is_contiguous() && flat.numel() == shape_numel(shape),
               "[dense_view] needs a contiguous 1-D tensor of ", shape_numel(shape),
               " elements, got shape ", shape_str(flat.shape()));
  return Tensor(std::make_shared<TensorImpl>(flat.storage(), shape, strides_for(shape, format),
                                             flat.offset(), flat.dtype()));
}

MemoryFormat format_of_inputs(std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* t : inputs) {
    if (t->defined() && t->memory_format() == MemoryFormat::ChannelsLast) {
      return MemoryFormat::ChannelsLast;
    }
  }
  return MemoryFormat::Contiguous;
}

MemoryFormat kernel_format(Device device, MemoryFormat wanted) {
  return backend_for(device).channels_last_kernels() ? wanted : MemoryFormat::Contiguous;
}

MemoryFormat preferred_memory_format(Device device) {
  return kernel_format(device, MemoryFormat::ChannelsLast);
}

}  // namespace tandem::ops
