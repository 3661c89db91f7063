#pragma once
/// Storage: one allocation on one device, shared by every tensor view of it.

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
  ~Storage() { allocator_->deallocate(data_, nbytes_); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_;
  size_t nbytes_;
  Device device_;
  Allocator* allocator_;
};

}  // namespace tandem
