// libFuzzer entry point of tandem::fuzz::store_session (targets.h).
#include "tests/fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tandem::fuzz::store_session(data, size);
}
