#include "engine/cuda/caching_allocator.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device.h"
#include "engine/cuda/stream.h"
#include "engine/tensor.h"

namespace tandem::cuda {
namespace {

/// A piece of a segment (one cudaMalloc). Blocks of a segment are chained by prev/next in
/// address order; all of them belong to the segment's stream.
struct Block {
  size_t size = 0;
  size_t requested = 0;  ///< bytes asked for while allocated
  char* ptr = nullptr;
  cudaStream_t stream = nullptr;
  bool small = false;      ///< which pool it returns to
  bool allocated = false;  ///< handed out to a caller
  int pending_events = 0;  ///< events of other streams to pass before reuse
  Block* prev = nullptr;
  Block* next = nullptr;
  std::vector<cudaStream_t> stream_uses;  ///< other streams that used it (record_stream)
};

bool is_free(const Block* block) {
  return !block->allocated && block->pending_events == 0;
}

// Free blocks ordered by (stream, size, address): lower_bound finds the smallest block of a
// stream that fits (best fit).
struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    const auto sa = reinterpret_cast<uintptr_t>(a->stream);
    const auto sb = reinterpret_cast<uintptr_t>(b->stream);
    if (sa != sb) return sa < sb;
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
  std::unordered_map<void*, Block*> active;             ///< allocated blocks by address
  std::vector<std::pair<cudaEvent_t, Block*>> pending;  ///< cross-stream frees in flight
  std::vector<cudaEvent_t> spare_events;
  CachingAllocatorStats stats;

  Pool& pool_of(const Block* block) { return block->small ? small_pool : large_pool; }

  Block* take_free(Pool& pool, cudaStream_t stream, size_t size) {
    Block key;
    key.stream = stream;
    key.size = size;
    const auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->stream != stream) return nullptr;
    Block* block = *it;
    pool.erase(it);
    return block;
  }

  Block* new_segment(size_t size, cudaStream_t stream, bool small) {
    size_t segment = kSmallSegment;
    if (!small) {
      segment = size <= kLargeRequest ? kMediumSegment
                                      : (size + kLargeRound - 1) / kLargeRound * kLargeRound;
    }
    void* ptr = nullptr;
    cudaError_t status = cudaMalloc(&ptr, segment);
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

  // Returns a block to its pool, merged with free neighbours.
  void free_block(Block* block) {
    Pool& pool = pool_of(block);
    if (block->prev != nullptr && is_free(block->prev)) {
      Block* prev = block->prev;
      pool.erase(prev);
      prev->size += block->size;
      prev->next = block->next;
      if (block->next != nullptr) block->next->prev = prev;
      delete block;
      block = prev;
    }
    if (block->next != nullptr && is_free(block->next)) {
      Block* next = block->next;
      pool.erase(next);
      block->size += next->size;
      block->next = next->next;
      if (next->next != nullptr) next->next->prev = block;
      delete next;
    }
    pool.insert(block);
  }

  void event_done(size_t index) {
    auto [event, block] = pending[index];
    spare_events.push_back(event);
    if (--block->pending_events == 0) {
      --stats.pending_free_blocks;
      free_block(block);
    }
  }

  // Frees the blocks whose cross-stream events have all completed.
  void process_events() {
    std::vector<std::pair<cudaEvent_t, Block*>> still_pending;
    std::vector<size_t> done;
    for (size_t i = 0; i < pending.size(); ++i) {
      const cudaError_t status = cudaEventQuery(pending[i].first);
      if (status == cudaErrorNotReady) {
        cudaGetLastError();
        still_pending.push_back(pending[i]);
        continue;
      }
      CUDA_CHECK(status);
      done.push_back(i);
    }
    for (size_t i : done) event_done(i);
    pending = std::move(still_pending);
  }

  void synchronize_events() {
    for (size_t i = 0; i < pending.size(); ++i) {
      CUDA_CHECK(cudaEventSynchronize(pending[i].first));
      event_done(i);
    }
    pending.clear();
  }

  // cudaFree for every segment that is one free block.
  void release_cached() {
    synchronize_events();
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

  // Records an event on every other stream that used `block`. Never throws: when an event
  // cannot be recorded, the host waits for that stream instead.
  void record_uses(Block* block) noexcept {
    for (cudaStream_t stream : block->stream_uses) {
      cudaEvent_t event = nullptr;
      if (!spare_events.empty()) {
        event = spare_events.back();
        spare_events.pop_back();
      } else if (cudaEventCreateWithFlags(&event, cudaEventDisableTiming) != cudaSuccess) {
        event = nullptr;
      }
      if (event != nullptr && cudaEventRecord(event, stream) == cudaSuccess) {
        pending.emplace_back(event, block);
        ++block->pending_events;
        continue;
      }
      cudaGetLastError();
      if (event != nullptr) spare_events.push_back(event);
      cudaStreamSynchronize(stream);
    }
    block->stream_uses.clear();
  }
};

CachingAllocator::CachingAllocator(int device) : state_(std::make_unique<State>()) {
  check_device(device, "cuda allocator");
  state_->device = device;
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard lock(state_->mutex);
  try {
    DeviceGuard guard(state_->device);
    state_->release_cached();
    for (cudaEvent_t event : state_->spare_events) cudaEventDestroy(event);
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
  if (nbytes == 0) return nullptr;
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  DeviceGuard guard(s.device);
  s.process_events();
  const size_t size = round_size(nbytes);
  const bool small = size <= kSmallRequest;
  Block* block = s.take_free(small ? s.small_pool : s.large_pool, stream, size);
  if (block != nullptr) {
    ++s.stats.cache_hits;
  } else {
    block = s.new_segment(size, stream, small);
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
  if (!block->stream_uses.empty()) {
    int previous = -1;
    const bool switch_device = cudaGetDevice(&previous) == cudaSuccess && previous != s.device;
    if (switch_device) cudaSetDevice(s.device);
    s.record_uses(block);
    if (switch_device) cudaSetDevice(previous);
  }
  if (block->pending_events > 0) {
    ++s.stats.pending_free_blocks;
  } else {
    s.free_block(block);
  }
}

void CachingAllocator::record_stream(void* ptr, cudaStream_t stream) {
  if (ptr == nullptr) return;
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  const auto it = s.active.find(ptr);
  TANDEM_CHECK(it != s.active.end(), "[record_stream] ", ptr,
               " is not the start of a live allocation on cuda:", s.device);
  Block* block = it->second;
  if (stream == block->stream) return;
  auto& uses = block->stream_uses;
  if (std::find(uses.begin(), uses.end(), stream) == uses.end()) uses.push_back(stream);
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

DeviceBuffer::DeviceBuffer(int device, size_t nbytes)
    : allocator_(&caching_allocator(device)),
      data_(allocator_->allocate(nbytes)),
      nbytes_(nbytes) {}

DeviceBuffer::~DeviceBuffer() {
  allocator_->deallocate(data_, nbytes_);
}

}  // namespace tandem::cuda
