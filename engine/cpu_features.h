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

enum class CpuVendor { Intel, Amd, Other };

/// The vendor cpuid reports ("GenuineIntel", "AuthenticAMD"); Other elsewhere.
CpuVendor cpu_vendor();
const char* cpu_vendor_name(CpuVendor vendor);

/// How bfloat16 training compares with float32 on a CPU (Note [Where bf16 pays]).
enum class Bf16Speed {
  Faster,    ///< AMX, or AVX512-BF16 on AMD
  Slower,    ///< AVX512-BF16 without AMX on Intel: native, but slower than float32
  Emulated,  ///< no bfloat16 instructions: oneDNN emulates it, or (AVX2) float32 on copies
};

struct Bf16Verdict {
  Bf16Speed speed;
  /// Why, for a message: e.g. "Intel with AVX512-BF16 but no AMX: vdpbf16ps does no more
  /// multiply-adds per cycle than float32 FMA there".
  std::string reason;
};

/// The verdict for a CPU of `vendor` whose oneDNN ISA is `isa` (cpu_kernel_isa()'s names): a
/// pure function, so every kind of machine can be tested on any one.
Bf16Verdict bf16_verdict(CpuVendor vendor, const std::string& isa);
/// bf16_verdict() of this CPU (ONEDNN_MAX_CPU_ISA caps it, as the other checks).
Bf16Verdict cpu_bf16_verdict();

}  // namespace tandem
