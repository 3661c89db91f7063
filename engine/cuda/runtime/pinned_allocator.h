#pragma once
/// Page-locked (pinned) host memory for staging host↔device copies: the DMA engine reads it
/// directly, so a copy from it is truly asynchronous and runs at full PCIe/NVLink-C2C speed.
///
/// cudaHostAlloc is slow, so blocks are cached by size class like the CPU allocator's (Note [Host
/// block cache] in engine/host_block_cache.h: at most 12.5 % waste above 32 KiB, whole pages
/// below), with no cap: staging memory is reused every step. An asynchronous copy may still read
/// or write a block when its tensor is freed, so the backend's copy() calls record_stream() for
/// pinned sources and the block goes to the cache only once those streams have passed the copy:
/// until then it counts as allocated in the statistics.

#include <cuda_runtime_api.h>

#include <memory>

#include "engine/allocator.h"
#include "engine/tensor.h"

namespace tandem::cuda {

class PinnedHostAllocator final : public Allocator {
 public:
  PinnedHostAllocator();
  ~PinnedHostAllocator() override;
  PinnedHostAllocator(const PinnedHostAllocator&) = delete;
  PinnedHostAllocator& operator=(const PinnedHostAllocator&) = delete;

  void* allocate(size_t nbytes) override;
  void deallocate(void* ptr, size_t nbytes) noexcept override;
  AllocatorStats stats() const override;
  CacheStats detailed_stats() const;

  /// When `ptr` is the start of a block of this allocator: notes that `stream` (of `device`)
  /// reads or writes it and returns true. Returns false for any other pointer.
  bool record_stream(void* ptr, cudaStream_t stream, int device);
  /// Frees the cached blocks (cudaFreeHost), waiting for pending stream uses first.
  void empty_cache();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// The process-wide pinned host allocator (never destroyed, Note [Leaked singletons]).
PinnedHostAllocator& pinned_host_allocator();

/// A CPU tensor in pinned memory, for staging copies (a DataLoader's batches, say). Pinned
/// memory belongs to the calling thread's current device: a thread not bound to the device it
/// stages for allocates under a DeviceGuard (Note [Device contexts] in
/// engine/cuda/runtime/device.h).
Tensor empty_pinned(const Shape& shape, DType dtype = DType::Float32);

}  // namespace tandem::cuda
