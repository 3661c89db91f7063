#pragma once
/// Tensor: a view (shape, strides, offset, dtype) onto shared Storage, plus the
/// autograd metadata that makes it part of a define-by-run graph.
///
/// Tensor is a cheap handle (one shared_ptr); copies alias the same data, as in
/// PyTorch. Use clone() for an independent copy. What it points at, TensorImpl and its
/// AutogradMeta, is in engine/tensor_impl.h, for the engine's own code. Tensor's methods live in
/// tensor.cpp (metadata, autograd) and ops/shape_ops.cpp (contiguous, view, reshape, to, clone).

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/error.h"
#include "engine/memory_format.h"
#include "engine/shape.h"
#include "engine/storage.h"

namespace tandem {

namespace autograd {
class Node;
}

class TensorImpl;

struct TensorOptions {
  DType dtype = DType::Float32;
  Device device = Device::cpu();
  bool requires_grad = false;
  MemoryFormat memory_format = MemoryFormat::Contiguous;  ///< ChannelsLast needs a 4-D shape
};

class Tensor {
 public:
  /// A hook that runs right after a gradient has been accumulated into this leaf's .grad().
  using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;

  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }

  // --- metadata
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t offset() const;
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  /// Size of dimension d; negative d counts from the end.
  int64_t size(int64_t d) const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;
  /// Dense in `format` (Note [Memory formats]); is_contiguous(Contiguous) == is_contiguous().
  bool is_contiguous(MemoryFormat format) const;
  /// ChannelsLast when the strides are channels-last and not also plain row-major (a tensor
  /// with C == 1 or H == W == 1 is both: its memory reads the same either way), else
  /// Contiguous. PyTorch's suggest_memory_format().
  MemoryFormat memory_format() const;
  /// Dense in either format: the elements fill [data_ptr, data_ptr + nbytes) with no gap.
  bool is_dense() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  const std::shared_ptr<Storage>& storage() const;

  /// Pointer to the first element (storage data + offset).
  void* data_ptr() const;
  template <typename T>
  T* data() const {
    TANDEM_CHECK(dtype() == DTypeOf<T>::value, "[data] tensor is ", dtype_name(dtype()),
                 ", asked for ", dtype_name(DTypeOf<T>::value));
    return static_cast<T*>(data_ptr());
  }

  // --- views and copies (differentiable)
  Tensor contiguous() const;
  /// This tensor dense in `format`: itself when it already is, else a copy (differentiable).
  Tensor contiguous(MemoryFormat format) const;
  Tensor view(const Shape& shape) const;     ///< needs a contiguous tensor; one size may be -1
  Tensor reshape(const Shape& shape) const;  ///< view if possible, else copy
  Tensor slice(int64_t start, int64_t end) const;  ///< rows [start, end) of dim 0, a view
  Tensor flatten(int64_t start_dim = 1) const;
  Tensor to(Device device) const;
  /// Keeps the memory format; not differentiable (engine/ops/cast.h's cast() is).
  Tensor to(DType dtype) const;
  Tensor clone() const;  ///< keeps the memory format
  /// Same data, no autograd history.
  Tensor detach() const;

  // --- host access (synchronises with the device)
  template <typename T>
  std::vector<T> to_vector() const;
  /// The value of a one-element tensor, as double.
  double item() const;

  // --- in-place (never recorded by autograd)
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor& copy_(const Tensor& src);  ///< same shape and dtype; may cross devices

  // --- autograd
  bool requires_grad() const;
  /// Marks a leaf as a parameter to differentiate with respect to.
  Tensor& set_requires_grad(bool requires_grad);
  bool is_leaf() const;
  Tensor grad() const;
  void set_grad(const Tensor& grad) const;
  /// Replaces the data behind this tensor, keeping its identity and autograd state
  /// (PyTorch's `param.data = ...`). Only for leaves.
  void set_data(const Tensor& data) const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  uint32_t output_nr() const;
  /// Runs backward from this tensor; a one-element tensor may omit `grad`.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  /// Returns an id for remove_hook(). Hooks run in registration order on the
  /// backward worker thread of this tensor's device.
  int register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const;
  void remove_hook(int id) const;

  TensorImpl* impl() const { return impl_.get(); }
  /// Two handles on the same tensor (not just the same storage).
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  const TensorImpl& checked_impl() const;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& out, const Tensor& tensor);

}  // namespace tandem
