#pragma once
/// The per-device, stream-aware caching allocator behind every CUDA tensor.
///
/// Note [Caching allocator]: cudaMalloc and cudaFree synchronise the device and cost tens of
/// microseconds to milliseconds, so blocks are kept and reused (PyTorch's design, simplified):
/// - sizes are rounded up to 512 bytes; requests up to 1 MiB are carved from 2 MiB segments
///   (the small pool), requests up to 10 MiB from 20 MiB segments, larger ones get a segment of
///   their size rounded up to 2 MiB (the large pool);
/// - a free block big enough for a request is split, the rest stays free; freed neighbours in a
///   segment merge again;
/// - a block belongs to the stream it was allocated on (the calling thread's current stream,
///   known by its id: Note [Stream ids] in engine/cuda/runtime/stream.h) and is reused only for
///   allocations on that stream, where stream order makes reuse safe without synchronising. A
///   block also used on other streams, of this device or another, is announced with
///   record_stream(); when it is freed, an event is recorded on each of those streams and the
///   block is reused only once all of them have passed it;
/// - when a stream is destroyed, its blocks go to the default stream once its work has run;
/// - when cudaMalloc fails, the cache is emptied (after waiting for pending events, then for the
///   device: cudaFree of memory that queued kernels still use is not safe) and the call retried
///   once before "out of memory" is thrown.
/// After the first training step the cache holds every size the step needs, so later steps
/// make no cudaMalloc or cudaFree calls (detailed_stats().cache_misses stops growing).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "engine/allocator.h"

namespace tandem {
class Tensor;
}

namespace tandem::cuda {

struct CachingAllocatorStats {
  int64_t allocated_bytes = 0;       ///< bytes requested by live allocations
  int64_t peak_allocated_bytes = 0;  ///< since construction or reset_peak_stats()
  int64_t reserved_bytes = 0;        ///< bytes held from cudaMalloc (all segments)
  int64_t peak_reserved_bytes = 0;
  int64_t allocation_count = 0;     ///< allocate() calls with a size > 0
  int64_t cache_hits = 0;           ///< allocations served by a cached block
  int64_t cache_misses = 0;         ///< allocations that needed a new segment (cudaMalloc)
  int64_t segment_count = 0;        ///< segments currently held
  int64_t cuda_free_count = 0;      ///< segments given back (empty_cache, out-of-memory retry)
  int64_t pending_free_blocks = 0;  ///< freed blocks waiting for another stream's events
};

class CachingAllocator final : public Allocator {
 public:
  static constexpr size_t kRound = 512;               ///< every size is a multiple of this
  static constexpr size_t kSmallRequest = 1 << 20;    ///< up to this: the small pool
  static constexpr size_t kSmallSegment = 2 << 20;    ///< segment size of the small pool
  static constexpr size_t kMediumSegment = 20 << 20;  ///< segment for requests up to 10 MiB
  static constexpr size_t kLargeRequest = 10 << 20;   ///< above this: a segment of its own
  static constexpr size_t kLargeRound = 2 << 20;      ///< those are rounded up to 2 MiB

  /// An allocator of its own for `device`; the tensors use caching_allocator(device). Tests make
  /// their own to start from empty statistics.
  explicit CachingAllocator(int device);
  /// Frees every cached segment; blocks still handed out are leaked (their memory goes with the
  /// process).
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// A block for `nbytes` on the calling thread's current stream of this device; nullptr for 0.
  void* allocate(size_t nbytes) override;
  /// A block for `nbytes` that will be used on `stream` (of this device).
  void* allocate(size_t nbytes, cudaStream_t stream);
  /// allocate(nbytes), or nullptr where that would need more memory than the device has free
  /// now: never empties the cache (which synchronises the device) and never throws out of
  /// memory. For requests with a cheaper alternative, such as a convolution's workspace.
  void* try_allocate(size_t nbytes);
  void deallocate(void* ptr, size_t nbytes) noexcept override;
  AllocatorStats stats() const override;
  CachingAllocatorStats detailed_stats() const;

  /// Marks the block that starts at `ptr` as used on `stream` too: when it is freed, it is not
  /// reused before `stream` has run everything queued on it up to the free. A stream of
  /// Stream::create may belong to another device; a default stream (nullptr) is this device's;
  /// any other handle throws (stream_info()).
  void record_stream(void* ptr, cudaStream_t stream);
  /// Gives every cached segment that is entirely free back to the driver (cudaFree), after
  /// waiting for pending cross-stream frees and for the device.
  void empty_cache();
  /// `stream` (with id `id`, of this device) is about to be destroyed: its blocks, free and
  /// live, move to the default stream once the work queued on it so far has run (Note [Stream
  /// ids]). Never throws.
  void retire_stream(uint64_t id, cudaStream_t stream) noexcept;
  void reset_peak_stats();
  int device() const;

  /// The size a request is rounded to (the block size it gets).
  static size_t round_size(size_t nbytes);

 private:
  void* allocate_on(size_t nbytes, cudaStream_t stream, bool may_empty_cache);

  struct State;
  std::unique_ptr<State> state_;
};

/// The allocator of CUDA tensors on `device` (created on first use, never destroyed: tensors
/// may be freed during static destruction).
CachingAllocator& caching_allocator(int device);

/// CachingAllocator::retire_stream() on every allocator of `device` that exists (Stream's
/// destructor calls it).
void retire_stream_blocks(int device, uint64_t id, cudaStream_t stream) noexcept;

/// record_stream() for the storage of a CUDA tensor: it is used on `stream` as well.
void record_stream(const Tensor& tensor, cudaStream_t stream);

/// A scratch buffer from the caching allocator for the duration of a scope (cuDNN workspaces,
/// reduction partials), on the current stream of `device`.
class DeviceBuffer {
 public:
  DeviceBuffer(int device, size_t nbytes);
  /// With CachingAllocator::try_allocate: data() is null when the memory is not there now.
  DeviceBuffer(int device, size_t nbytes, std::nothrow_t);
  /// On `stream` of `device` rather than the current one, for work queued on that stream only:
  /// the buffer may go as soon as that work is queued (stream order keeps the block from reuse
  /// before it has run).
  DeviceBuffer(int device, size_t nbytes, cudaStream_t stream);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return data_; }
  size_t size() const { return nbytes_; }

 private:
  CachingAllocator* allocator_;
  void* data_;
  size_t nbytes_;
};

}  // namespace tandem::cuda
