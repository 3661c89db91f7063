#include "engine/cpu_features.h"

#include <oneapi/dnnl/dnnl.h>

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
    default: return "other";
  }
}

}  // namespace tandem
