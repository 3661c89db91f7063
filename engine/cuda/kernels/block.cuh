#pragma once
// The CUDA policies of Note [Block policy] (kernels/block.h): CUB block reductions, warp
// shuffles, atomicMin.

#include <cub/block/block_reduce.cuh>

namespace tandem::cuda::kernels {

// A block of kSize threads whose reductions add up T; `storage` is the kernel's __shared__
// CUB scratch.
template <typename T, int kSize>
class CudaBlock {
 public:
  using Reduce = cub::BlockReduce<T, kSize>;
  using Storage = typename Reduce::TempStorage;

  __device__ explicit CudaBlock(Storage& storage) : storage_(storage) {}

  __device__ unsigned thread() const { return threadIdx.x; }
  __device__ void sync() const { __syncthreads(); }
  template <typename Op>
  __device__ T reduce(T value, Op op) {
    return Reduce(storage_).Reduce(value, op);
  }
  __device__ T sum(T value) { return Reduce(storage_).Sum(value); }
  __device__ static void atomic_min(int* target, int value) { atomicMin(target, value); }

 private:
  Storage& storage_;
};

// The warp view for kernels that only shuffle (argmax_rows).
struct CudaWarp {
  __device__ unsigned thread() const { return threadIdx.x; }
  template <typename V>
  __device__ V shfl_down(V value, int offset) const {
    return __shfl_down_sync(0xffffffffu, value, offset);
  }
};

}  // namespace tandem::cuda::kernels
