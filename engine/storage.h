#pragma once
/// Storage: one allocation on one device, shared by every tensor view of it.
///
/// Note [Released storage]: release() gives the memory back while every tensor on the storage
/// keeps its shape, and restore() allocates it again (contents undefined until written), as
/// PyTorch's storage.resize_(0) and resize_(n). ZeRO stage 3 frees a unit's gathered parameters
/// this way between uses (parallel/zero/sharded_units.h): the tensors that autograd saved for
/// backward alias the same storage, so they see the parameters gathered again, where a new
/// allocation would leave them on the old memory. A tensor read while its storage is released
/// throws (Tensor::data_ptr()) instead of reading freed memory.

#include <cstddef>

#include "engine/allocator.h"
#include "engine/device.h"

namespace tandem {

class Storage {
 public:
  Storage(size_t nbytes, Device device, Allocator& allocator)
      : data_(allocator.allocate(nbytes)),
        nbytes_(nbytes),
        device_(device),
        allocator_(&allocator) {}
  ~Storage() { release(); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  /// Frees the memory; nbytes() stays (Note [Released storage]). Idempotent.
  void release() noexcept {
    if (released_) return;
    allocator_->deallocate(data_, nbytes_);
    data_ = nullptr;
    released_ = true;
  }
  /// Allocates nbytes() again after release(), contents undefined; nothing otherwise.
  void restore() {
    if (!released_) return;
    data_ = allocator_->allocate(nbytes_);
    released_ = false;
  }
  bool released() const { return released_; }
  Device device() const { return device_; }

 private:
  void* data_;
  size_t nbytes_;
  Device device_;
  Allocator* allocator_;
  bool released_ = false;
};

}  // namespace tandem
