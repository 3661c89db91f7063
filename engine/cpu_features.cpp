#include "engine/cpu_features.h"

#include <oneapi/dnnl/dnnl.h>

namespace tandem {

bool cpu_has_native_bf16() {
  // oneDNN's ISA values are sets of feature bits, each containing the smaller ones.
  const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_bf16);
  return (isa & bf16) == bf16;
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
