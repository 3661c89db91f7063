// libFuzzer entry point of tandem::fuzz::safetensors (targets.h).
#include "tests/fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tandem::fuzz::safetensors(data, size);
}
