#include "engine/tensor.h"

#include <algorithm>
#include <cstring>
#include <ostream>

#include "engine/autograd/engine.h"
#include "engine/autograd/node.h"
#include "engine/backend/backend.h"
#include "engine/host_reads.h"
#include "engine/ops/factory.h"
#include "engine/ops/layout.h"
#include "engine/profiler.h"
#include "engine/tensor_impl.h"

namespace tandem {

AutogradMeta& TensorImpl::mutable_autograd() {
  if (!autograd_) autograd_ = std::make_unique<AutogradMeta>();
  return *autograd_;
}

void TensorImpl::set_data(const TensorImpl& other) {
  storage_ = other.storage_;
  shape_ = other.shape_;
  strides_ = other.strides_;
  offset_ = other.offset_;
  dtype_ = other.dtype_;
}

const TensorImpl& Tensor::checked_impl() const {
  TANDEM_CHECK(impl_ != nullptr, "[tensor] use of an undefined tensor");
  return *impl_;
}

const Shape& Tensor::shape() const {
  return checked_impl().shape();
}
const Shape& Tensor::strides() const {
  return checked_impl().strides();
}
int64_t Tensor::offset() const {
  return checked_impl().offset();
}
DType Tensor::dtype() const {
  return checked_impl().dtype();
}
Device Tensor::device() const {
  return checked_impl().storage()->device();
}
const std::shared_ptr<Storage>& Tensor::storage() const {
  return checked_impl().storage();
}
int64_t Tensor::numel() const {
  return shape_numel(shape());
}

int64_t Tensor::size(int64_t d) const {
  const int64_t rank = dim();
  const int64_t wrapped = d < 0 ? d + rank : d;
  TANDEM_CHECK(wrapped >= 0 && wrapped < rank, "[size] dim ", d,
               " out of range for a tensor of shape ", shape_str(shape()));
  return shape()[static_cast<size_t>(wrapped)];
}

bool Tensor::is_contiguous() const {
  return is_dense_in(shape(), strides(), MemoryFormat::Contiguous);
}

bool Tensor::is_contiguous(MemoryFormat format) const {
  return is_dense_in(shape(), strides(), format);
}

MemoryFormat Tensor::memory_format() const {
  return !is_contiguous() && is_contiguous(MemoryFormat::ChannelsLast) ? MemoryFormat::ChannelsLast
                                                                       : MemoryFormat::Contiguous;
}

bool Tensor::is_dense() const {
  return is_contiguous() || is_contiguous(MemoryFormat::ChannelsLast);
}

void* Tensor::data_ptr() const {
  // Note [Released storage]
  TANDEM_CHECK(!storage()->released(),
               "[tensor] reading a tensor whose memory was released (Storage::release(): a ZeRO "
               "stage-3 parameter outside its unit's forward and backward, or used by a module "
               "whose forward did not run through Module::operator())");
  return static_cast<char*>(storage()->data()) +
         offset() * static_cast<int64_t>(dtype_size(dtype()));
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  TANDEM_CHECK(dtype() == DTypeOf<T>::value, "[to_vector] tensor is ", dtype_name(dtype()),
               ", asked for ", dtype_name(DTypeOf<T>::value));
  if (device().is_cpu()) detail::count_host_read();  // a device's copy to the host counts itself
  const Tensor host = detach().to(Device::cpu()).contiguous();
  std::vector<T> values(static_cast<size_t>(host.numel()));
  if (!values.empty()) std::memcpy(values.data(), host.data_ptr(), values.size() * sizeof(T));
  return values;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;
template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;
template std::vector<Float16> Tensor::to_vector<Float16>() const;

double Tensor::item() const {
  TANDEM_CHECK(numel() == 1, "[item] needs a one-element tensor, got shape ", shape_str(shape()));
  switch (dtype()) {
    case DType::Float32: return to_vector<float>()[0];
    case DType::Int64: return static_cast<double>(to_vector<int64_t>()[0]);
    case DType::UInt8: return to_vector<uint8_t>()[0];
    case DType::BFloat16: return static_cast<float>(to_vector<BFloat16>()[0]);
    case DType::Float16: return static_cast<float>(to_vector<Float16>()[0]);
  }
  return 0.0;
}

Tensor& Tensor::fill_(double value) {
  const profiler::RecordScope scope("fill_");
  TANDEM_CHECK(is_dense(), "[fill_] needs a contiguous or channels-last tensor");
  Tensor memory = ops::kernel_view(*this);
  backend_for(device()).fill(memory, value);
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  const profiler::RecordScope scope("copy_");
  TANDEM_CHECK(src.shape() == shape() && src.dtype() == dtype(), "[copy_] source ",
               shape_str(src.shape()), " ", dtype_name(src.dtype()), " does not match destination ",
               shape_str(shape()), " ", dtype_name(dtype()));
  TANDEM_CHECK(is_dense(), "[copy_] needs a contiguous or channels-last destination");
  const Device engine_device = src.device().is_cuda() ? src.device() : device();
  if (is_contiguous()) {
    backend_for(engine_device).copy(src, *this);
  } else {
    // Both seen as NHWC: the destination's view is contiguous, as the kernels want.
    Tensor destination = ops::nhwc_view(*this);
    backend_for(engine_device).copy(ops::nhwc_view(src), destination);
  }
  return *this;
}

// --- autograd accessors

bool Tensor::requires_grad() const {
  const AutogradMeta* meta = checked_impl().autograd();
  return meta != nullptr && meta->requires_grad;
}

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  TANDEM_CHECK(is_leaf(), "[set_requires_grad] only leaves can be marked; use detach() first");
  // bfloat16: mixed precision's activations (Note [bfloat16 activations] in
  // engine/backend/backend.h).
  TANDEM_CHECK(!requires_grad || dtype() == DType::Float32 || dtype() == DType::BFloat16,
               "[set_requires_grad] only float32 and bfloat16 tensors can require gradients, got ",
               dtype_name(dtype()));
  impl_->mutable_autograd().requires_grad = requires_grad;
  return *this;
}

bool Tensor::is_leaf() const {
  const AutogradMeta* meta = checked_impl().autograd();
  return meta == nullptr || meta->grad_fn == nullptr;
}

Tensor Tensor::grad() const {
  const AutogradMeta* meta = checked_impl().autograd();
  return meta == nullptr ? Tensor() : meta->grad;
}

void Tensor::set_grad(const Tensor& grad) const {
  TANDEM_CHECK(!grad.defined() || (grad.shape() == shape() && grad.device() == device()),
               "[set_grad] gradient ", shape_str(grad.shape()), " does not match tensor ",
               shape_str(shape()));
  impl_->mutable_autograd().grad = grad;
}

void Tensor::set_data(const Tensor& data) const {
  TANDEM_CHECK(is_leaf() && data.defined(), "[set_data] needs a leaf and a defined tensor");
  impl_->set_data(*data.impl());
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  const AutogradMeta* meta = checked_impl().autograd();
  return meta == nullptr ? none : meta->grad_fn;
}

uint32_t Tensor::output_nr() const {
  const AutogradMeta* meta = checked_impl().autograd();
  return meta == nullptr ? 0 : meta->output_nr;
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  Tensor seed = grad;
  if (!seed.defined()) {
    TANDEM_CHECK(numel() == 1, "[backward] grad can be omitted only for one-element tensors, got ",
                 shape_str(shape()));
    seed = full(shape(), 1.0, {.dtype = dtype(), .device = device()});
  }
  autograd::run_backward({*this}, {seed}, retain_graph);
}

int Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const {
  TANDEM_CHECK(is_leaf() && requires_grad(),
               "[register_post_accumulate_grad_hook] needs a leaf that requires grad");
  AutogradMeta& meta = impl_->mutable_autograd();
  std::lock_guard lock(meta.mutex);
  const int id = meta.next_hook_id++;
  meta.post_accumulate_hooks.emplace_back(id, std::move(hook));
  return id;
}

void Tensor::remove_hook(int id) const {
  AutogradMeta& meta = impl_->mutable_autograd();
  std::lock_guard lock(meta.mutex);
  std::erase_if(meta.post_accumulate_hooks, [id](const auto& entry) { return entry.first == id; });
}

std::ostream& operator<<(std::ostream& out, const Tensor& tensor) {
  if (!tensor.defined()) return out << "Tensor(undefined)";
  return out << "Tensor(" << shape_str(tensor.shape()) << ", " << dtype_name(tensor.dtype()) << ", "
             << tensor.device() << ")";
}

}  // namespace tandem
