// Ordered-key kernels (Note [Ordered keys] in ordered_keys.h): the NCCL group's min and max of
// floating tensors run on them.

#include "engine/cuda/kernels/launch.cuh"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/kernels/ordered_keys.h"

namespace tandem::cuda::kernels {
namespace {

// Runs launch(T{}) with T the C++ type of `type`, a floating one, then checks the launch.
template <typename Launch>
void with_floating_type(DType type, const char* op, const Launch& launch) {
  switch (type) {
    case DType::Float32: launch(float{}); break;
    case DType::BFloat16: launch(BFloat16{}); break;
    case DType::Float16: launch(Float16{}); break;
    default: TANDEM_FAIL("[", op, "] takes float32, bfloat16 or float16, not ", dtype_name(type));
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void to_ordered_keys(const void* in, DType type, KeyReduction reduction, uint32_t* keys, int64_t n,
                     cudaStream_t stream) {
  if (n == 0) return;
  with_floating_type(type, "ordered keys", [&](auto t) {
    using T = decltype(t);
    launch_grid_stride(OrderedKeysBody<T>{static_cast<const T*>(in), keys, reduction, n}, stream);
  });
}

void from_ordered_keys(const uint32_t* keys, DType type, void* out, int64_t n,
                       cudaStream_t stream) {
  if (n == 0) return;
  with_floating_type(type, "ordered keys", [&](auto t) {
    using T = decltype(t);
    launch_grid_stride(FromOrderedKeysBody<T>{keys, static_cast<T*>(out), n}, stream);
  });
}

}  // namespace tandem::cuda::kernels
