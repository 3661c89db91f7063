#include "engine/cuda/runtime/pinned_allocator.h"

#include <algorithm>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/cuda/runtime/cuda_check.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/host_block_cache.h"
#include "engine/tensor_impl.h"

namespace tandem::cuda {
namespace {

struct HostBlock {
  size_t nbytes = 0;  ///< what allocate() was asked for
  bool allocated = false;
  int pending_events = 0;
  std::vector<std::pair<cudaStream_t, int>> stream_uses;  ///< (stream, device)
};

/// A copy that may still read or write a block: the block is reused once `event` has passed.
struct PendingUse {
  cudaEvent_t event = nullptr;  ///< from the event pool of `device` (Note [Event pool])
  int device = 0;
  void* ptr = nullptr;
};

// The cache's memory (Note [Host block cache]). Out of memory is nullptr, so that the cache
// gives back its free blocks and tries again; any other failure throws.
void* host_alloc(size_t size) {
  TANDEM_CHECK(device_count() > 0, "[pinned allocator] ", unavailable_reason());
  void* ptr = nullptr;
  const cudaError_t status = cudaHostAlloc(&ptr, size, cudaHostAllocDefault);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;
  }
  CUDA_CHECK(status);
  return ptr;
}

// A free cannot throw: after a failure (a sticky error) the pages go with the process.
void host_free(void* ptr, size_t /*size*/) noexcept {
  if (cudaFreeHost(ptr) != cudaSuccess) cudaGetLastError();
}

}  // namespace

struct PinnedHostAllocator::State {
  HostBlockCache cache{"[pinned allocator]", HostMemory{host_alloc, host_free},
                       std::numeric_limits<size_t>::max()};
  std::mutex mutex;                             // guards what follows; taken before the cache's
  std::unordered_map<void*, HostBlock> blocks;  ///< blocks handed out or waiting for copies
  std::vector<PendingUse> pending;

  // Caches the block once it is neither handed out nor used by a copy.
  void release(void* ptr) {
    const auto it = blocks.find(ptr);
    if (it->second.allocated || it->second.pending_events > 0) return;
    cache.deallocate(ptr, it->second.nbytes);
    blocks.erase(it);
  }

  void process_events(bool wait) {
    std::vector<PendingUse> still_pending;
    for (auto use = pending.begin(); use != pending.end(); ++use) {
      const cudaError_t status =
          wait ? cudaEventSynchronize(use->event) : cudaEventQuery(use->event);
      if (status == cudaErrorNotReady) {
        cudaGetLastError();
        still_pending.push_back(*use);
        continue;
      }
      if (status != cudaSuccess) {
        // A failed query (a sticky error) tells nothing of the copy: this use and those not yet
        // looked at stay pending with their events, none of which goes back to the pool, where
        // another user could record it again; the uses already done are not done twice.
        still_pending.insert(still_pending.end(), use, pending.end());
        pending.swap(still_pending);  // `use` is not looked at again: the check throws
        CUDA_CHECK(status);
      }
      release_event(use->device, use->event);
      --blocks.at(use->ptr).pending_events;
      release(use->ptr);
    }
    pending = std::move(still_pending);
  }
};

PinnedHostAllocator::PinnedHostAllocator() : state_(std::make_unique<State>()) {}

PinnedHostAllocator::~PinnedHostAllocator() {
  try {
    empty_cache();
  } catch (...) {
    // Destructors never throw; the pages go with the process.
  }
}

void* PinnedHostAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  s.process_events(false);
  void* ptr = s.cache.allocate(nbytes);
  HostBlock& block = s.blocks[ptr];
  block.nbytes = nbytes;
  block.allocated = true;
  return ptr;
}

void PinnedHostAllocator::deallocate(void* ptr, size_t) noexcept {
  if (ptr == nullptr) return;
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  const auto it = s.blocks.find(ptr);
  if (it == s.blocks.end()) return;
  HostBlock& block = it->second;
  block.allocated = false;
  for (const auto& [stream, device] : block.stream_uses) {
    const StreamMark mark = record_event_or_wait(stream, device);
    if (mark.waited) continue;
    // Without an event nothing will say when the copy is done: the block stays pending for good.
    if (mark.event != nullptr) s.pending.push_back({mark.event, device, ptr});
    ++block.pending_events;
  }
  block.stream_uses.clear();
  s.release(ptr);
}

bool PinnedHostAllocator::record_stream(void* ptr, cudaStream_t stream, int device) {
  std::lock_guard lock(state_->mutex);
  const auto it = state_->blocks.find(ptr);
  if (it == state_->blocks.end() || !it->second.allocated) return false;
  auto& uses = it->second.stream_uses;
  const std::pair<cudaStream_t, int> use{stream, device};
  if (std::find(uses.begin(), uses.end(), use) == uses.end()) uses.push_back(use);
  return true;
}

void PinnedHostAllocator::empty_cache() {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  s.process_events(true);
  s.cache.empty_cache();
}

AllocatorStats PinnedHostAllocator::stats() const {
  return allocator_stats(state_->cache.stats());
}

CacheStats PinnedHostAllocator::detailed_stats() const {
  return state_->cache.stats();
}

PinnedHostAllocator& pinned_host_allocator() {
  static auto* allocator = new PinnedHostAllocator();  // Note [Leaked singletons]
  return *allocator;
}

Tensor empty_pinned(const Shape& shape, DType dtype) {
  const size_t nbytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  auto storage = std::make_shared<Storage>(nbytes, Device::cpu(), pinned_host_allocator());
  return Tensor(
      std::make_shared<TensorImpl>(std::move(storage), shape, contiguous_strides(shape), 0, dtype));
}

}  // namespace tandem::cuda
