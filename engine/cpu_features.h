#pragma once
/// What the CPU can compute fast, as oneDNN (the CPU kernels' library) sees it.

#include <string>

namespace tandem {

/// Whether this CPU's kernels compute bfloat16 in hardware: AVX512-BF16 (Zen 4, Cooper Lake)
/// or AMX (Sapphire Rapids). Without either, oneDNN emulates it, several times slower than
/// float32. Honours ONEDNN_MAX_CPU_ISA, so a capped run behaves as the smaller CPU would.
bool cpu_has_native_bf16();

/// oneDNN's name for the instruction set its kernels use here, e.g. "avx512_core_bf16", "avx2".
std::string cpu_kernel_isa();

}  // namespace tandem
