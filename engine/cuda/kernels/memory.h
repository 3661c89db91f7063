#pragma once
/// Bodies of the memory kernels (memory.cu): fill, dtype casts, strided gathers. Note [Kernel
/// bodies] in grid.h.

#include <cstdint>

#include "engine/cuda/kernels/types.h"
#include "engine/host_device.h"

namespace tandem::cuda::kernels {

/// out: (n) = value
template <typename T>
struct FillBody {
  T* out;
  T value;
  int64_t n;
  TANDEM_HD void operator()(int64_t i) const { out[i] = value; }
};

/// in: (n) → out: (n). A half type converts through float both ways (its explicit constructor
/// from float, its conversion to float), so half <-> int is int -> float -> half and back.
template <typename From, typename To>
struct CastBody {
  const From* in;
  To* out;
  int64_t n;
  TANDEM_HD void operator()(int64_t i) const { out[i] = static_cast<To>(in[i]); }
};

/// in: strided as `src` → out: (n) contiguous, n = numel(src)
template <typename T>
struct CopyStridedBody {
  const T* in;
  StridedLayout src;
  T* out;
  int64_t n;
  TANDEM_HD void operator()(int64_t i) const { out[i] = in[offset_of(i, src)]; }
};

}  // namespace tandem::cuda::kernels
