// libFuzzer entry point of tandem::fuzz::launch_env (targets.h).
#include "tests/fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tandem::fuzz::launch_env(data, size);
}
