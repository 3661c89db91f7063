#pragma once
/// What a Tensor handle points at: the view of its storage (TensorImpl) and its autograd state
/// (AutogradMeta). For the engine's own code (ops, autograd) and tests; users hold Tensors.

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace tandem {

/// Autograd state of one tensor. Leaves own their gradient and hooks; non-leaves
/// point at the node that produced them.
struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;
  uint32_t output_nr = 0;                          ///< which output of grad_fn this tensor is
  std::weak_ptr<autograd::Node> grad_accumulator;  ///< shared by all graphs using this leaf
  std::vector<std::pair<int, Tensor::PostAccumulateGradHook>> post_accumulate_hooks;
  int next_hook_id = 0;
  std::mutex mutex;  ///< guards grad_accumulator and hooks (several devices may touch them)
};

class TensorImpl {
 public:
  TensorImpl(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset,
             DType dtype)
      : storage_(std::move(storage)),
        shape_(std::move(shape)),
        strides_(std::move(strides)),
        offset_(offset),
        dtype_(dtype) {}

  const std::shared_ptr<Storage>& storage() const { return storage_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  DType dtype() const { return dtype_; }

  /// Created on first use; null for tensors that never took part in autograd.
  AutogradMeta* autograd() const { return autograd_.get(); }
  AutogradMeta& mutable_autograd();
  /// Points this tensor at other's data (storage, shape, strides, dtype), keeping its autograd
  /// state: what Module::to() uses so that handles held elsewhere (optimizers) stay valid.
  void set_data(const TensorImpl& other);

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Shape strides_;
  int64_t offset_;
  DType dtype_;
  std::unique_ptr<AutogradMeta> autograd_;
};

}  // namespace tandem
