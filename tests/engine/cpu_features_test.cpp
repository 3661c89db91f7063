// Note [Where bf16 pays]: the bf16 verdict for every kind of CPU the project meets, through the
// pure bf16_verdict(); this machine's own answer through cpu_bf16_verdict().

#include "engine/cpu_features.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

TEST(CpuFeatures, Bf16IsSlowerOnIntelWithAvx512Bf16ButNoAmx) {
  const Bf16Verdict verdict = bf16_verdict(CpuVendor::Intel, "avx512_core_bf16");
  EXPECT_EQ(verdict.speed, Bf16Speed::Slower);
  EXPECT_NE(verdict.reason.find("no AMX"), std::string::npos) << verdict.reason;
}

TEST(CpuFeatures, Bf16IsFasterOnZen4AndWithAmx) {
  EXPECT_EQ(bf16_verdict(CpuVendor::Amd, "avx512_core_bf16").speed, Bf16Speed::Faster);
  EXPECT_EQ(bf16_verdict(CpuVendor::Intel, "avx512_core_amx").speed, Bf16Speed::Faster);
  // oneDNN 3's names: Granite Rapids' AMX-FP16, and an AMX CPU capped below AMX.
  EXPECT_EQ(bf16_verdict(CpuVendor::Intel, "avx512_core_amx_fp16").speed, Bf16Speed::Faster);
  EXPECT_EQ(bf16_verdict(CpuVendor::Intel, "avx512_core_fp16").speed, Bf16Speed::Slower);
  // Another vendor's AVX512-BF16 has not been measured slow: the benefit of the doubt.
  EXPECT_EQ(bf16_verdict(CpuVendor::Other, "avx512_core_bf16").speed, Bf16Speed::Faster);
}

TEST(CpuFeatures, Bf16IsEmulatedWithoutBf16Instructions) {
  for (const char* isa : {"avx2", "avx2_vnni", "avx2_vnni_2", "avx512_core", "avx512_core_vnni"}) {
    for (CpuVendor vendor : {CpuVendor::Intel, CpuVendor::Amd}) {
      const Bf16Verdict verdict = bf16_verdict(vendor, isa);
      EXPECT_EQ(verdict.speed, Bf16Speed::Emulated) << isa;
      EXPECT_NE(verdict.reason.find(isa), std::string::npos) << verdict.reason;
    }
  }
}

TEST(CpuFeatures, ThisMachinesVerdictFollowsItsVendorAndIsa) {
  const Bf16Verdict verdict = cpu_bf16_verdict();
  EXPECT_EQ(verdict.speed, bf16_verdict(cpu_vendor(), cpu_kernel_isa()).speed);
  EXPECT_EQ(verdict.speed == Bf16Speed::Emulated, !cpu_has_native_bf16());
}

}  // namespace
}  // namespace tandem
