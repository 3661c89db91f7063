#pragma once
/// The bodies of the libFuzzer targets: each feeds one input to one parser of outside input and
/// must return 0 for every input, the parser ending in a result or a tandem::Error, never a crash,
/// a sanitizer report, a hang or an allocation the input does not justify. The *_fuzz.cpp entry
/// points call them under libFuzzer (scripts/fuzz.sh); corpus_replay_test.cpp replays every
/// input kept in corpus/ (seeds and the inputs of fixed crashes) in the normal build.

#include <cstddef>
#include <cstdint>

namespace tandem::fuzz {

int safetensors(const uint8_t* data, size_t size);
int checkpoint(const uint8_t* data, size_t size);
int cifar10(const uint8_t* data, size_t size);
int store_request(const uint8_t* data, size_t size);
int store_session(const uint8_t* data, size_t size);
int launch_env(const uint8_t* data, size_t size);
int file_store_records(const uint8_t* data, size_t size);

}  // namespace tandem::fuzz
