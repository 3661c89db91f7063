// DeviceBuffer (declared in caching_allocator.h): a block of the device's caching allocator, held
// for a scope.
#include <cstddef>
#include <new>

#include "engine/cuda/runtime/caching_allocator.h"

namespace tandem::cuda {

DeviceBuffer::DeviceBuffer(int device, size_t nbytes)
    : allocator_(&caching_allocator(device)),
      data_(allocator_->allocate(nbytes)),
      nbytes_(nbytes) {}

DeviceBuffer::DeviceBuffer(int device, size_t nbytes, std::nothrow_t)
    : allocator_(&caching_allocator(device)),
      data_(allocator_->try_allocate(nbytes)),
      nbytes_(nbytes) {}

DeviceBuffer::DeviceBuffer(int device, size_t nbytes, cudaStream_t stream)
    : allocator_(&caching_allocator(device)),
      data_(allocator_->allocate(nbytes, stream)),
      nbytes_(nbytes) {}

DeviceBuffer::~DeviceBuffer() {
  allocator_->deallocate(data_, nbytes_);
}

}  // namespace tandem::cuda
