#pragma once
/// Reading FileStore's log (Note [FileStore format] in file_store.h) as untrusted bytes: the file
/// sits in a folder others may write to, and its path may name another program's file.
///
/// Note [FileStore records]: records are read one field at a time, each length checked before
/// its bytes are read: a field longer than kMaxFieldBytes (what set() accepts) is refused, and a
/// file whose first key is not the store's header is refused after its first 4 + 17 bytes, so a
/// foreign file of any size costs a few bytes of memory, not its size (review S7).

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "parallel/comm/socket.h"

namespace tandem::parallel::file_store {

/// The most bytes a key or a value may hold: a TCP store frame's limit.
constexpr uint32_t kMaxFieldBytes = net::kMaxFrameBytes;

/// `size` bytes of the file at `offset` (pread); throws if the file ends first.
using ReadAt = std::function<std::string(off_t offset, size_t size)>;
/// Takes one record, in file order.
using OnRecord = std::function<void(std::string key, std::string value)>;

/// Reads the whole records between `from` and `size` (the file's size), handing each to
/// `on_record`, and returns the offset after the last. `from` 0 means the file's start, whose
/// first key must be `header_key`. Throws one line naming `address` for a file that is not a
/// store's, a field over kMaxFieldBytes, or a record cut short.
off_t read_records(const ReadAt& read_at, off_t from, off_t size, std::string_view header_key,
                   const std::string& address, const OnRecord& on_record);

}  // namespace tandem::parallel::file_store
