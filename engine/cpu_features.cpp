#include "engine/cpu_features.h"

#include <oneapi/dnnl/dnnl.h>

#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace tandem {

namespace {

// oneDNN's ISA values are sets of feature bits, each containing the smaller ones.
bool effective_isa_includes(dnnl_cpu_isa_t wanted) {
  const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  return (isa & static_cast<unsigned>(wanted)) == static_cast<unsigned>(wanted);
}

}  // namespace

bool cpu_has_native_bf16() {
  return effective_isa_includes(dnnl_cpu_isa_avx512_core_bf16);
}

bool cpu_has_bf16_primitives() {
  return effective_isa_includes(dnnl_cpu_isa_avx512_core);
}

std::string cpu_kernel_isa() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
#if DNNL_VERSION_MAJOR >= 3  // ISAs oneDNN 2.6 does not name (Note [oneDNN 2 and 3])
    case dnnl_cpu_isa_avx2_vnni_2: return "avx2_vnni_2";
    case dnnl_cpu_isa_avx512_core_fp16: return "avx512_core_fp16";
    case dnnl_cpu_isa_avx512_core_amx_fp16: return "avx512_core_amx_fp16";
#endif
    default: return "other";
  }
}

CpuVendor cpu_vendor() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return CpuVendor::Other;
  char name[13] = {};  // leaf 0 spells the vendor in ebx, edx, ecx
  std::memcpy(name, &ebx, 4);
  std::memcpy(name + 4, &edx, 4);
  std::memcpy(name + 8, &ecx, 4);
  if (std::strcmp(name, "GenuineIntel") == 0) return CpuVendor::Intel;
  if (std::strcmp(name, "AuthenticAMD") == 0) return CpuVendor::Amd;
#endif
  return CpuVendor::Other;
}

const char* cpu_vendor_name(CpuVendor vendor) {
  switch (vendor) {
    case CpuVendor::Intel: return "Intel";
    case CpuVendor::Amd: return "AMD";
    case CpuVendor::Other: return "this vendor's";
  }
  return "this vendor's";
}

// Note [Where bf16 pays]: bfloat16 halves the bytes moved, but a CPU's convolutions are
// compute-bound, so what decides is how many multiply-adds a cycle its bfloat16 instructions do
// against float32 FMA. Measured (oneDNN 2.6.3, a large 3x3 convolution and whole ResNet steps,
// bench_cifar and scripts/compare_pytorch.py, docs/benchmarks.md):
// - AMX (Sapphire Rapids and later): tile multiply-adds, many times float32's: faster.
// - AVX512-BF16 on AMD Zen 4: ResNet-20 1.57x and ResNet-18 1.86x float32's images/s
//   (2026-11-26): faster.
// - AVX512-BF16 without AMX on Intel (Xeon family 6 model 207 days): 182 against 321 GFLOP/s on
//   the large convolution, ResNet-20 and ResNet-18 0.65x float32 (2026-11-27): vdpbf16ps does no
//   more multiply-adds per cycle than float32 FMA there, and the conversions come on top: slower.
// - No AVX512-BF16 (Skylake's AVX-512, AVX2): emulated, several times slower.
// A CPU of another vendor with AVX512-BF16 is given the benefit of the doubt (faster): the rule
// names only what was measured slow. ISA and vendor decide, not a timing at start-up: the answer
// is the same on every run, on a loaded machine too, and testable for every kind of CPU here.
// oneDNN 3's larger ISAs contain the smaller: avx512_core_amx_fp16 has AMX, avx512_core_fp16 (what
// ONEDNN_MAX_CPU_ISA can cap an AMX CPU at) has AVX512-BF16.
Bf16Verdict bf16_verdict(CpuVendor vendor, const std::string& isa) {
  if (isa.starts_with("avx512_core_amx")) return {Bf16Speed::Faster, "AMX"};
  if (isa != "avx512_core_bf16" && isa != "avx512_core_fp16") {
    return {Bf16Speed::Emulated, "no AVX512-BF16 or AMX: this CPU has only " + isa};
  }
  if (vendor == CpuVendor::Intel) {
    return {Bf16Speed::Slower,
            "Intel with AVX512-BF16 but no AMX: vdpbf16ps does no more multiply-adds per cycle "
            "than float32 FMA, so bf16 trains at about 0.65x float32's speed"};
  }
  return {Bf16Speed::Faster, std::string(cpu_vendor_name(vendor)) + " with AVX512-BF16"};
}

Bf16Verdict cpu_bf16_verdict() {
  return bf16_verdict(cpu_vendor(), cpu_kernel_isa());
}

}  // namespace tandem
