#pragma once
/// The CPU block policy for the block-cooperative kernel bodies (Note [Block policy] in
/// engine/cuda/kernels/block.h): a block's threads are std::threads, __syncthreads is a
/// std::barrier, a block reduction goes through a shared array and lands in thread 0 only (as
/// CUB's does; the other threads get a poison value), and a warp shuffle is an exchange through
/// a shared array between the 32 threads of a warp, with a barrier per warp.

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

namespace tandem::testing {

constexpr int kWarpSize = 32;

/// What the threads of one block share: the reduction slots, the shuffle slots, the barriers.
template <typename T>
struct CpuBlockShared {
  explicit CpuBlockShared(int threads)
      : slots(static_cast<size_t>(threads)),
        exchange(static_cast<size_t>(threads)),
        block_barrier(threads) {
    for (int first = 0; first < threads; first += kWarpSize) {
      warp_barriers.push_back(
          std::make_unique<std::barrier<>>(std::min(kWarpSize, threads - first)));
    }
  }
  std::vector<T> slots;
  std::vector<uint64_t> exchange;  // any shuffled value of up to 8 bytes, by its bits
  std::barrier<> block_barrier;
  std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
};

/// One thread's view of its block; T is the type its reductions add up.
template <typename T>
class CpuBlock {
 public:
  CpuBlock(CpuBlockShared<T>& shared, int thread) : shared_(shared), thread_(thread) {}

  unsigned thread() const { return static_cast<unsigned>(thread_); }
  void sync() { shared_.block_barrier.arrive_and_wait(); }

  /// op over every thread's value, in thread order, valid in thread 0 only. As with CUB, the
  /// slots may be reused only after a sync().
  template <typename Op>
  T reduce(T value, Op op) {
    shared_.slots[thread_] = value;
    sync();
    if (thread_ != 0) return poison();
    T total = shared_.slots[0];
    for (size_t t = 1; t < shared_.slots.size(); ++t) total = op(total, shared_.slots[t]);
    return total;
  }
  T sum(T value) { return reduce(value, std::plus<T>()); }

  /// The value of the thread `offset` lanes up in this warp, or the own value past the warp's
  /// end (__shfl_down_sync over a full warp).
  template <typename V>
  V shfl_down(V value, int offset) {
    static_assert(sizeof(V) <= sizeof(uint64_t) && std::is_trivially_copyable_v<V>);
    std::barrier<>& warp = *shared_.warp_barriers[thread_ / kWarpSize];
    warp.arrive_and_wait();  // the warp's previous exchange has been read
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(V));
    shared_.exchange[thread_] = bits;
    warp.arrive_and_wait();
    const int lane = thread_ % kWarpSize;
    const int source = lane + offset < kWarpSize ? thread_ + offset : thread_;
    V result;
    std::memcpy(&result, &shared_.exchange[source], sizeof(V));
    return result;
  }

  /// atomicMin on an int.
  static void atomic_min(int* target, int value) {
    std::atomic_ref<int> ref(*target);
    int current = ref.load();
    while (value < current && !ref.compare_exchange_weak(current, value)) {
    }
  }

 private:
  static T poison() {
    if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::quiet_NaN();
    return std::numeric_limits<T>::min();
  }
  CpuBlockShared<T>& shared_;
  int thread_;
};

/// Runs body(block, block_index) for every block of a grid of `blocks` blocks of `threads`
/// std::threads, the blocks in a shuffled order (fixed by `seed`) and one after another: every
/// thread finishes a block before any starts the next, as blocks never share memory.
template <typename T, typename Body>
void run_blocks(int64_t blocks, int threads, Body&& body, uint64_t seed = 1) {
  std::vector<int64_t> order(static_cast<size_t>(blocks));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
  CpuBlockShared<T> shared(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      CpuBlock<T> block(shared, t);
      for (const int64_t b : order) {
        body(block, b);
        block.sync();  // the block's shared memory is fresh for the next one
      }
    });
  }
  for (std::thread& thread : pool) thread.join();
}

}  // namespace tandem::testing
