#include "engine/cuda/runtime/caching_allocator.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/cuda/runtime/cuda_check.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/tensor.h"

namespace tandem::cuda {
namespace {

/// A stream that used a block besides its own (record_stream).
struct StreamUse {
  cudaStream_t stream = nullptr;
  int device = 0;
  bool operator==(const StreamUse&) const = default;
};

/// A piece of a segment (one cudaMalloc). Blocks of a segment are chained by prev/next in
/// address order; all of them belong to the segment's stream.
struct Block {
  size_t size = 0;
  size_t requested = 0;  ///< bytes asked for while allocated
  char* ptr = nullptr;
  uint64_t stream = 0;     ///< the stream's id (Note [Stream ids]); 0: the default stream
  bool small = false;      ///< which pool it returns to
  bool allocated = false;  ///< handed out to a caller
  int pending_events = 0;  ///< events of other streams to pass before reuse
  Block* prev = nullptr;
  Block* next = nullptr;
  std::vector<StreamUse> stream_uses;  ///< other streams that used it (record_stream)
};

/// An event that a block (or a retired stream) waits for.
struct PendingEvent {
  cudaEvent_t event = nullptr;
  int device = 0;               ///< the event's (and its stream's) device
  Block* block = nullptr;       ///< freed once all its events have passed; nullptr for a retirement
  uint64_t retired_stream = 0;  ///< whose blocks move to the default stream when it has passed
};

bool is_free(const Block* block) {
  return !block->allocated && block->pending_events == 0;
}

// Free blocks by (stream, size, address): lower_bound finds a stream's smallest fit (best fit).
struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    return std::less<const char*>()(a->ptr, b->ptr);
  }
};
using Pool = std::set<Block*, BlockOrder>;

std::string mib(int64_t bytes) {
  return std::to_string(bytes / (1 << 20)) + " MiB";
}

}  // namespace

struct CachingAllocator::State {
  int device = 0;
  mutable std::mutex mutex;  // guards everything below
  Pool small_pool;
  Pool large_pool;
  std::unordered_map<void*, Block*> active;  ///< allocated blocks by address
  std::vector<PendingEvent> pending;         ///< cross-stream frees and retirements in flight
  std::unordered_set<Block*> stranded;       ///< pending for good: a use nothing can wait for
  CachingAllocatorStats stats;

  // The bookkeeping only, never a CUDA call: the segments release_cached() did not give back (a
  // block still handed out or stranded) keep their device memory until the process ends.
  ~State() {
    std::unordered_set<Block*> blocks(stranded);
    for (const Pool* pool : {&small_pool, &large_pool}) blocks.insert(pool->begin(), pool->end());
    for (const auto& [ptr, block] : active) blocks.insert(block);
    for (const PendingEvent& entry : pending) {
      if (entry.block != nullptr) blocks.insert(entry.block);
    }
    for (Block* block : blocks) delete block;
  }

  Pool& pool_of(const Block* block) { return block->small ? small_pool : large_pool; }

  Block* take_free(Pool& pool, uint64_t stream, size_t size) {
    Block key;
    key.stream = stream;
    key.size = size;
    const auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->stream != stream) return nullptr;
    Block* block = *it;
    pool.erase(it);
    return block;
  }

  // nullptr when the device is out of memory and `may_empty_cache` is false.
  Block* new_segment(size_t size, uint64_t stream, bool small, bool may_empty_cache) {
    size_t segment = kSmallSegment;
    if (!small) {
      segment = size <= kLargeRequest ? kMediumSegment
                                      : (size + kLargeRound - 1) / kLargeRound * kLargeRound;
    }
    void* ptr = nullptr;
    cudaError_t status = cudaMalloc(&ptr, segment);
    if (status == cudaErrorMemoryAllocation && !may_empty_cache) {
      cudaGetLastError();
      return nullptr;
    }
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      release_cached();  // Note [Caching allocator]: empty the cache and retry once
      status = cudaMalloc(&ptr, segment);
    }
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      size_t free_bytes = 0, total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      cudaGetLastError();
      TANDEM_FAIL("[cuda allocator] out of memory on cuda:", device, " allocating ", mib(size),
                  " (a segment of ", mib(segment), "): tensors hold ", mib(stats.allocated_bytes),
                  ", the cache holds ", mib(stats.reserved_bytes), "; the device has ",
                  mib(free_bytes), " free of ", mib(total_bytes));
    }
    CUDA_CHECK(status);
    auto* block = new Block;
    block->size = segment;
    block->ptr = static_cast<char*>(ptr);
    block->stream = stream;
    block->small = small;
    stats.reserved_bytes += static_cast<int64_t>(segment);
    stats.peak_reserved_bytes = std::max(stats.peak_reserved_bytes, stats.reserved_bytes);
    ++stats.segment_count;
    return block;
  }

  // Keeps the first `size` bytes in `block`; the rest becomes a free block when it is worth it.
  void split(Block* block, size_t size) {
    const size_t remaining = block->size - size;
    const bool worth_it = block->small ? remaining >= kRound : remaining > kSmallRequest;
    if (!worth_it) return;
    auto* rest = new Block;
    rest->size = remaining;
    rest->ptr = block->ptr + size;
    rest->stream = block->stream;
    rest->small = block->small;
    rest->prev = block;
    rest->next = block->next;
    if (block->next != nullptr) block->next->prev = rest;
    block->next = rest;
    block->size = size;
    pool_of(rest).insert(rest);
  }

  // Moves `src`, a neighbour of `dst`, into `dst` when it is free (PyTorch's try_merge_blocks).
  void merge(Block* dst, Block* src, Pool& pool) {
    if (src == nullptr || !is_free(src)) return;
    pool.erase(src);
    if (src == dst->prev) {
      dst->ptr = src->ptr;
      dst->prev = src->prev;
      if (dst->prev != nullptr) dst->prev->next = dst;
    } else {
      dst->next = src->next;
      if (dst->next != nullptr) dst->next->prev = dst;
    }
    dst->size += src->size;
    delete src;
  }

  // Returns a block to its pool, merged with free neighbours.
  void free_block(Block* block) {
    Pool& pool = pool_of(block);
    merge(block, block->prev, pool);
    merge(block, block->next, pool);
    pool.insert(block);
  }

  // Every block of the stream `id`, wherever it is: free, allocated or waiting for events.
  std::vector<Block*> blocks_of(uint64_t id) const {
    std::vector<Block*> found;
    for (const Pool* pool : {&small_pool, &large_pool}) {
      for (Block* block : *pool) {
        if (block->stream == id) found.push_back(block);
      }
    }
    for (const auto& [ptr, block] : active) {
      if (block->stream == id) found.push_back(block);
    }
    for (const PendingEvent& entry : pending) {
      if (entry.block != nullptr && entry.block->stream == id) found.push_back(entry.block);
    }
    return found;
  }

  // Note [Stream ids]: the blocks of a destroyed stream, whose work has run, become the default
  // stream's. Free ones are re-sorted into their pool under the new key.
  void move_to_default_stream(uint64_t id) {
    for (Block* block : blocks_of(id)) {
      const bool in_pool = is_free(block) && pool_of(block).erase(block) > 0;
      block->stream = 0;
      if (in_pool) pool_of(block).insert(block);
    }
  }

  // Blocks first, retirements last: a block of a retired stream whose last event passed at the
  // same time is then back in its pool, where the retirement finds it (it has left `pending`).
  void events_done(std::vector<PendingEvent> done) {
    std::stable_partition(done.begin(), done.end(),
                          [](const PendingEvent& entry) { return entry.block != nullptr; });
    for (const PendingEvent& entry : done) {
      release_event(entry.device, entry.event);
      if (entry.block == nullptr) {
        move_to_default_stream(entry.retired_stream);
      } else if (--entry.block->pending_events == 0) {
        --stats.pending_free_blocks;
        free_block(entry.block);
      }
    }
  }

  // Frees the blocks whose cross-stream events have all completed.
  void process_events() {
    std::vector<PendingEvent> still_pending;
    std::vector<PendingEvent> done;
    for (const PendingEvent& entry : pending) {
      const cudaError_t status = cudaEventQuery(entry.event);
      if (status == cudaErrorNotReady) {
        cudaGetLastError();
        still_pending.push_back(entry);
        continue;
      }
      CUDA_CHECK(status);
      done.push_back(entry);
    }
    pending = std::move(still_pending);
    events_done(std::move(done));
  }

  void synchronize_events() {
    for (const PendingEvent& entry : pending) CUDA_CHECK(cudaEventSynchronize(entry.event));
    std::vector<PendingEvent> done = std::move(pending);
    pending.clear();
    events_done(std::move(done));
  }

  bool holds_free_segment() const {
    for (const Pool* pool : {&small_pool, &large_pool}) {
      for (const Block* block : *pool) {
        if (block->prev == nullptr && block->next == nullptr) return true;
      }
    }
    return false;
  }

  // cudaFree for every segment that is one free block. A free block may still be in use by
  // kernels queued before its free (stream order makes reuse safe, not cudaFree, which only
  // "may" synchronise), so the device is synchronised first. The device is current.
  void release_cached() {
    synchronize_events();
    if (!holds_free_segment()) return;
    CUDA_CHECK(cudaDeviceSynchronize());
    for (Pool* pool : {&small_pool, &large_pool}) {
      for (auto it = pool->begin(); it != pool->end();) {
        Block* block = *it;
        if (block->prev != nullptr || block->next != nullptr) {
          ++it;
          continue;
        }
        CUDA_CHECK(cudaFree(block->ptr));
        stats.reserved_bytes -= static_cast<int64_t>(block->size);
        --stats.segment_count;
        ++stats.cuda_free_count;
        it = pool->erase(it);
        delete block;
      }
    }
  }

  // Records an event on every other stream that used `block`. Never throws.
  void record_uses(Block* block) noexcept {
    for (const StreamUse& use : block->stream_uses) {
      const StreamMark mark = record_event_or_wait(use.stream, use.device);
      if (mark.waited) continue;
      // Without an event nothing will say when the use is over: the block stays pending for good.
      if (mark.event != nullptr) {
        pending.push_back({mark.event, use.device, block, 0});
      } else {
        stranded.insert(block);
      }
      ++block->pending_events;
    }
    block->stream_uses.clear();
  }
};

namespace {

// Every live allocator, for retire_stream_blocks (Note [Stream ids]). Locked before any
// allocator's own mutex.
struct LiveAllocators {
  std::mutex mutex;
  std::vector<CachingAllocator*> allocators;
};

LiveAllocators& live_allocators() {
  static auto* live = new LiveAllocators;  // Note [Leaked singletons]
  return *live;
}

}  // namespace

CachingAllocator::CachingAllocator(int device) : state_(std::make_unique<State>()) {
  check_device(device, "cuda allocator");
  state_->device = device;
  LiveAllocators& live = live_allocators();
  std::lock_guard lock(live.mutex);
  live.allocators.push_back(this);
}

CachingAllocator::~CachingAllocator() {
  {
    LiveAllocators& live = live_allocators();
    std::lock_guard lock(live.mutex);
    std::erase(live.allocators, this);
  }
  std::lock_guard lock(state_->mutex);
  try {
    DeviceGuard guard(state_->device);
    state_->release_cached();
  } catch (...) {
    // Destructors never throw; at worst the driver reclaims the memory with the process.
  }
}

size_t CachingAllocator::round_size(size_t nbytes) {
  return std::max<size_t>(kRound, (nbytes + kRound - 1) / kRound * kRound);
}

int CachingAllocator::device() const {
  return state_->device;
}

void* CachingAllocator::allocate(size_t nbytes) {
  return allocate(nbytes, current_stream(state_->device));
}

void* CachingAllocator::allocate(size_t nbytes, cudaStream_t stream) {
  return allocate_on(nbytes, stream, /*may_empty_cache=*/true);
}

void* CachingAllocator::try_allocate(size_t nbytes) {
  return allocate_on(nbytes, current_stream(state_->device), /*may_empty_cache=*/false);
}

void* CachingAllocator::allocate_on(size_t nbytes, cudaStream_t stream, bool may_empty_cache) {
  if (nbytes == 0) return nullptr;
  State& s = *state_;
  const uint64_t id = stream_info(stream, s.device).id;
  std::lock_guard lock(s.mutex);
  DeviceGuard guard(s.device);
  s.process_events();
  const size_t size = round_size(nbytes);
  const bool small = size <= kSmallRequest;
  Block* block = s.take_free(small ? s.small_pool : s.large_pool, id, size);
  if (block != nullptr) {
    ++s.stats.cache_hits;
  } else {
    block = s.new_segment(size, id, small, may_empty_cache);
    if (block == nullptr) return nullptr;  // try_allocate: the cache stays as it is
    ++s.stats.cache_misses;
  }
  s.split(block, size);
  block->allocated = true;
  block->requested = nbytes;
  s.active.emplace(block->ptr, block);
  s.stats.allocated_bytes += static_cast<int64_t>(nbytes);
  s.stats.peak_allocated_bytes = std::max(s.stats.peak_allocated_bytes, s.stats.allocated_bytes);
  ++s.stats.allocation_count;
  return block->ptr;
}

void CachingAllocator::deallocate(void* ptr, size_t) noexcept {
  if (ptr == nullptr) return;
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  const auto it = s.active.find(ptr);
  if (it == s.active.end()) return;  // not ours; nothing sensible to do without throwing
  Block* block = it->second;
  s.active.erase(it);
  s.stats.allocated_bytes -= static_cast<int64_t>(block->requested);
  block->requested = 0;
  block->allocated = false;
  s.record_uses(block);
  if (block->pending_events > 0) {
    ++s.stats.pending_free_blocks;
  } else {
    s.free_block(block);
  }
}

void CachingAllocator::record_stream(void* ptr, cudaStream_t stream) {
  if (ptr == nullptr) return;
  State& s = *state_;
  const StreamInfo info = stream_info(stream, s.device);
  std::lock_guard lock(s.mutex);
  const auto it = s.active.find(ptr);
  TANDEM_CHECK(it != s.active.end(), "[record_stream] ", ptr,
               " is not the start of a live allocation on cuda:", s.device);
  Block* block = it->second;
  if (info.id == block->stream && info.device == s.device) return;
  const StreamUse use{stream, info.device};
  auto& uses = block->stream_uses;
  if (std::find(uses.begin(), uses.end(), use) == uses.end()) uses.push_back(use);
}

void CachingAllocator::retire_stream(uint64_t id, cudaStream_t stream) noexcept {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  if (id == 0 || s.blocks_of(id).empty()) return;
  const StreamMark mark = record_event_or_wait(stream, s.device);
  if (mark.event != nullptr) {
    s.pending.push_back({mark.event, s.device, nullptr, id});
  } else if (mark.waited) {
    s.move_to_default_stream(id);
  }  // neither: the blocks keep the retired id, with which nothing allocates again
}

void retire_stream_blocks(int device, uint64_t id, cudaStream_t stream) noexcept {
  LiveAllocators& live = live_allocators();
  std::lock_guard lock(live.mutex);
  for (CachingAllocator* allocator : live.allocators) {
    if (allocator->device() == device) allocator->retire_stream(id, stream);
  }
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(state_->mutex);
  DeviceGuard guard(state_->device);
  state_->release_cached();
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard lock(state_->mutex);
  state_->stats.peak_allocated_bytes = state_->stats.allocated_bytes;
  state_->stats.peak_reserved_bytes = state_->stats.reserved_bytes;
}

AllocatorStats CachingAllocator::stats() const {
  const CachingAllocatorStats s = detailed_stats();
  return {s.allocated_bytes, s.reserved_bytes, s.peak_allocated_bytes, s.allocation_count};
}

CachingAllocatorStats CachingAllocator::detailed_stats() const {
  std::lock_guard lock(state_->mutex);
  return state_->stats;
}

CachingAllocator& caching_allocator(int device) {
  check_device(device, "cuda allocator");
  static std::mutex mutex;
  // Note [Leaked singletons]: never destroyed, so that a tensor freed during static destruction
  // (a global model, a worker thread's cache) still finds its allocator.
  static auto* allocators = new std::vector<CachingAllocator*>(device_count(), nullptr);
  std::lock_guard lock(mutex);
  auto& slot = (*allocators)[static_cast<size_t>(device)];
  if (slot == nullptr) slot = new CachingAllocator(device);
  return *slot;
}

void record_stream(const Tensor& tensor, cudaStream_t stream) {
  TANDEM_CHECK(tensor.device().is_cuda(), "[record_stream] needs a CUDA tensor, got ",
               tensor.device());
  caching_allocator(tensor.device().index).record_stream(tensor.storage()->data(), stream);
}

}  // namespace tandem::cuda
