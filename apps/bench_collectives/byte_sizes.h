#pragma once
/// Buffer sizes as people write them on a command line: "4K", "64KiB", "1M", "16MiB", "1G" (powers
/// of 1024, as nccl-tests' -b/-e), or plain bytes ("4096").

#include <cstdint>
#include <string>

namespace tandem::apps {

/// The bytes `text` names; throws "[bench_collectives] size '<text>' ..." for anything else (no
/// number, an unknown unit, zero, or more than 1 TiB).
int64_t parse_byte_size(const std::string& text);

/// "4 KiB", "64 MiB", "1 GiB" for whole multiples, else "<bytes> B".
std::string byte_size_label(int64_t bytes);

}  // namespace tandem::apps
