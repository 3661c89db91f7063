// libFuzzer entry point of tandem::fuzz::cifar10 (targets.h).
#include "tests/fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tandem::fuzz::cifar10(data, size);
}
