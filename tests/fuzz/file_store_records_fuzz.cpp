// libFuzzer entry point of tandem::fuzz::file_store_records (targets.h).
#include "tests/fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tandem::fuzz::file_store_records(data, size);
}
