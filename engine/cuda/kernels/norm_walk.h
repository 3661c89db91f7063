#pragma once
/// Packed loads and the division-free walks of the batch-norm kernels (Note [Batch-norm kernels]
/// in batch_norm.h). No CUDA include: the host compiler builds this header for the unit tests.

#include <cstdint>

#include "engine/cuda/kernels/types.h"
#include "engine/host_device.h"

namespace tandem::cuda::kernels {

/// V consecutive values of a row, loaded and stored at once (one 16-byte access for V * sizeof(T)
/// = 16) where the row and the pointer allow it (norm_pack in norm_plan.h).
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <int V, typename T>
TANDEM_HD inline Pack<T, V> load_pack(const T* at) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const Pack<T, V>*>(at);
#else
  Pack<T, V> pack;
  for (int k = 0; k < V; ++k) pack.v[k] = at[k];
  return pack;
#endif
}

template <int V, typename T>
TANDEM_HD inline void store_pack(T* at, const Pack<T, V>& pack) {
#ifdef __CUDA_ARCH__
  *reinterpret_cast<Pack<T, V>*>(at) = pack;
#else
  for (int k = 0; k < V; ++k) at[k] = pack.v[k];
#endif
}

/// The packs j, j + step, j + 2 * step, ... of channel c of an (N, C, HW) tensor, packs of V
/// values: pack j is column j % row of row j / row (image n's HW values of channel c), row = HW /
/// V. The constructor divides once; each advance() adds a whole number of rows and columns, and
/// a column past the end of its row carries into the next row.
struct ChannelWalk {
  TANDEM_HD ChannelWalk(const NormShape& s, int v, int64_t c, int64_t j, int64_t step)
      : row(s.hw / v),
        column(j % row),
        offset((j / row * s.c + c) * s.hw + column * v),
        step_columns(step % row),
        step_offset(step / row * s.c * s.hw + step_columns * v),
        carry_offset(s.c * s.hw - s.hw) {}

  TANDEM_HD void advance() {
    column += step_columns;
    offset += step_offset;
    if (column >= row) {  // the next image's row of the same channel
      column -= row;
      offset += carry_offset;
    }
  }

  int64_t row;     ///< packs per row
  int64_t column;  ///< of the current pack in its row
  int64_t offset;  ///< of the current pack's first value, in elements
  int64_t step_columns, step_offset, carry_offset;
};

/// The packs i, i + step, i + 2 * step, ... of a whole contiguous (N, C, HW) tensor, pack i at
/// offset i * V, tracking the channel of each without dividing (as ChannelWalk).
struct TensorWalk {
  TANDEM_HD TensorWalk(const NormShape& s, int v, int64_t i, int64_t step)
      : row(s.hw / v),
        channels(s.c),
        column(i % row),
        channel(i / row % s.c),
        step_columns(step % row),
        step_channels(step / row % s.c) {}

  TANDEM_HD void advance() {
    column += step_columns;
    channel += step_channels;
    if (column >= row) {
      column -= row;
      ++channel;
    }
    if (channel >= channels) channel -= channels;  // < 2 * channels before: one step wraps
  }

  int64_t row, channels;
  int64_t column;   ///< of the current pack in its row
  int64_t channel;  ///< of the current pack
  int64_t step_columns, step_channels;
};

}  // namespace tandem::cuda::kernels
