#pragma once
/// The input window of adaptive pooling's output cell i, shared by the CPU backend and the CUDA
/// kernel bodies so that both pool exactly the same pixels: PyTorch's adaptive bins,
/// [floor(i * in / out), ceil((i + 1) * in / out)).
#include <cstdint>

#include "engine/host_device.h"

namespace tandem {

TANDEM_HD inline int64_t bin_start(int64_t i, int64_t in, int64_t out) {
  return (i * in) / out;
}
TANDEM_HD inline int64_t bin_end(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

}  // namespace tandem
