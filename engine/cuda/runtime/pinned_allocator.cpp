#include "engine/cuda/runtime/pinned_allocator.h"

#include <algorithm>
#include <bit>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/cuda/runtime/cuda_check.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/tensor_impl.h"

namespace tandem::cuda {
namespace {

struct HostBlock {
  size_t size = 0;
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

}  // namespace

struct PinnedHostAllocator::State {
  mutable std::mutex mutex;                     // guards everything below
  std::unordered_map<void*, HostBlock> blocks;  ///< every block, by address
  std::multimap<size_t, void*> free_blocks;     ///< size → address
  std::vector<PendingUse> pending;
  int64_t allocated_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t allocation_count = 0;

  void release(void* ptr) {
    HostBlock& block = blocks.at(ptr);
    if (block.allocated || block.pending_events > 0) return;
    free_blocks.emplace(block.size, ptr);
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
  const size_t size = std::bit_ceil(std::max<size_t>(nbytes, 4096));
  void* ptr = nullptr;
  const auto it = s.free_blocks.find(size);
  if (it != s.free_blocks.end()) {
    ptr = it->second;
    s.free_blocks.erase(it);
  } else {
    TANDEM_CHECK(device_count() > 0, "[pinned allocator] ", unavailable_reason());
    CUDA_CHECK(cudaHostAlloc(&ptr, size, cudaHostAllocDefault));
    s.blocks[ptr].size = size;
    s.reserved_bytes += static_cast<int64_t>(size);
  }
  s.blocks[ptr].allocated = true;
  s.allocated_bytes += static_cast<int64_t>(size);
  s.peak_bytes = std::max(s.peak_bytes, s.allocated_bytes);
  ++s.allocation_count;
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
  s.allocated_bytes -= static_cast<int64_t>(block.size);
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
  for (const auto& [size, ptr] : s.free_blocks) {
    CUDA_CHECK(cudaFreeHost(ptr));
    s.reserved_bytes -= static_cast<int64_t>(size);
    s.blocks.erase(ptr);
  }
  s.free_blocks.clear();
}

AllocatorStats PinnedHostAllocator::stats() const {
  std::lock_guard lock(state_->mutex);
  return {state_->allocated_bytes, state_->reserved_bytes, state_->peak_bytes,
          state_->allocation_count};
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
