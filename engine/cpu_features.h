#pragma once
/// What the CPU can compute fast, as oneDNN (the CPU kernels' library) sees it.

#include <string>

namespace tandem {

/// Whether this CPU's kernels compute bfloat16 in hardware: AVX512-BF16 (Zen 4, Cooper Lake)
/// or AMX (Sapphire Rapids). Without either, oneDNN emulates it, several times slower than
/// float32. Honours ONEDNN_MAX_CPU_ISA, so a capped run behaves as the smaller CPU would.
bool cpu_has_native_bf16();

/// Whether oneDNN 2.6 has bfloat16 primitives here at all: it needs AVX-512 (avx512_core; native
/// with AVX512-BF16 or AMX, emulated without). On an AVX2 CPU it has none, and the CPU backend's
/// bfloat16 kernels that use oneDNN run its float32 primitives on widened copies instead.
bool cpu_has_bf16_primitives();

/// oneDNN's name for the instruction set its kernels use here, e.g. "avx512_core_bf16", "avx2".
std::string cpu_kernel_isa();

}  // namespace tandem
