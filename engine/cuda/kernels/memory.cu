// Memory kernels: fill, dtype casts, strided gathers, and a spin kernel for ordering tests.

#include <cstring>

#include "engine/cuda/kernels/launch.cuh"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/kernels/memory.h"
#include "engine/half.h"

namespace tandem::cuda::kernels {
namespace {

__device__ unsigned long long global_timer_ns() {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

__global__ void spin_kernel(long long nanoseconds) {
  const unsigned long long start = global_timer_ns();
  while (global_timer_ns() - start < static_cast<unsigned long long>(nanoseconds)) {
    __nanosleep(1000);
  }
}

template <typename T>
void launch_fill(void* out, int64_t n, uint64_t bits, cudaStream_t stream) {
  T value;
  static_assert(sizeof(T) <= sizeof(bits));
  std::memcpy(&value, &bits, sizeof(T));  // little-endian: the low bytes hold the pattern
  launch_grid_stride(FillBody<T>{static_cast<T*>(out), value, n}, stream);
}

template <typename From, typename To>
void launch_cast_to(const From* in, void* out, int64_t n, cudaStream_t stream) {
  launch_grid_stride(CastBody<From, To>{in, static_cast<To*>(out), n}, stream);
}

template <typename From>
void launch_cast(const void* in, void* out, DType out_type, int64_t n, cudaStream_t stream) {
  const auto* source = static_cast<const From*>(in);
  switch (out_type) {
    case DType::Float32: return launch_cast_to<From, float>(source, out, n, stream);
    case DType::Int64: return launch_cast_to<From, int64_t>(source, out, n, stream);
    case DType::UInt8: return launch_cast_to<From, uint8_t>(source, out, n, stream);
    case DType::BFloat16: return launch_cast_to<From, BFloat16>(source, out, n, stream);
    case DType::Float16: return launch_cast_to<From, Float16>(source, out, n, stream);
  }
}

template <typename T>
void launch_copy_strided(const void* in, const StridedLayout& src, void* out, int64_t n,
                         cudaStream_t stream) {
  launch_grid_stride(CopyStridedBody<T>{static_cast<const T*>(in), src, static_cast<T*>(out), n},
                     stream);
}

}  // namespace

void fill(void* out, int64_t n, int element_size, uint64_t bits, cudaStream_t stream) {
  if (n == 0) return;
  switch (element_size) {
    case 1: launch_fill<uint8_t>(out, n, bits, stream); break;
    case 2: launch_fill<uint16_t>(out, n, bits, stream); break;
    case 4: launch_fill<uint32_t>(out, n, bits, stream); break;
    case 8: launch_fill<uint64_t>(out, n, bits, stream); break;
    default: TANDEM_FAIL("[fill] unsupported element size ", element_size);
  }
  CUDA_CHECK_LAUNCH();
}

void cast(const void* in, DType in_type, void* out, DType out_type, int64_t n,
          cudaStream_t stream) {
  if (n == 0) return;
  switch (in_type) {
    case DType::Float32: launch_cast<float>(in, out, out_type, n, stream); break;
    case DType::Int64: launch_cast<int64_t>(in, out, out_type, n, stream); break;
    case DType::UInt8: launch_cast<uint8_t>(in, out, out_type, n, stream); break;
    case DType::BFloat16: launch_cast<BFloat16>(in, out, out_type, n, stream); break;
    case DType::Float16: launch_cast<Float16>(in, out, out_type, n, stream); break;
  }
  CUDA_CHECK_LAUNCH();
}

void copy_strided(const void* in, const StridedLayout& src, void* out, int element_size,
                  cudaStream_t stream) {
  int64_t n = 1;
  for (int d = 0; d < src.rank; ++d) n *= src.size[d];
  if (n == 0) return;
  switch (element_size) {
    case 1: launch_copy_strided<uint8_t>(in, src, out, n, stream); break;
    case 2: launch_copy_strided<uint16_t>(in, src, out, n, stream); break;
    case 4: launch_copy_strided<uint32_t>(in, src, out, n, stream); break;
    case 8: launch_copy_strided<uint64_t>(in, src, out, n, stream); break;
    default: TANDEM_FAIL("[copy] unsupported element size ", element_size);
  }
  CUDA_CHECK_LAUNCH();
}

void spin(long long nanoseconds, cudaStream_t stream) {
  spin_kernel<<<1, 1, 0, stream>>>(nanoseconds);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda::kernels
