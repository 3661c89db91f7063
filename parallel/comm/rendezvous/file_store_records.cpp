#include "parallel/comm/rendezvous/file_store_records.h"

#include <optional>

#include "engine/error.h"

namespace tandem::parallel::file_store {
namespace {

std::string foreign(const std::string& address) {
  return "[store] " + address +
         " is not a Tandem rendezvous file; name a file that does not exist (rank 0 creates it)";
}

// One record's fields, read with their lengths checked first (Note [FileStore records]).
class RecordCursor {
 public:
  RecordCursor(const ReadAt& read_at, off_t at, off_t size, const std::string& address)
      : read_at_(read_at), at_(at), size_(size), address_(address), first_(at == 0) {}

  /// The next field, or nothing when the file ends inside it.
  std::optional<std::string> field(std::optional<size_t> expected_size = std::nullopt) {
    if (size_ - at_ < 4) return std::nullopt;
    uint32_t n = 0;
    for (const char c : read_at_(at_, 4)) n = (n << 8) | static_cast<uint8_t>(c);
    TANDEM_CHECK(!expected_size || n == *expected_size, foreign(address_));
    if (n > kMaxFieldBytes) {
      TANDEM_CHECK(!first_, foreign(address_));
      TANDEM_FAIL("[store] ", address_, ": a record claims ", n,
                  " bytes, more than a store key or value may hold; is the file corrupted?");
    }
    if (static_cast<uint64_t>(size_ - at_ - 4) < n) return std::nullopt;
    std::string bytes = n == 0 ? std::string() : read_at_(at_ + 4, n);
    at_ += 4 + static_cast<off_t>(n);
    return bytes;
  }
  off_t at() const { return at_; }

 private:
  const ReadAt& read_at_;
  off_t at_;
  off_t size_;
  const std::string& address_;
  bool first_;
};

}  // namespace

off_t read_records(const ReadAt& read_at, off_t from, off_t size, std::string_view header_key,
                   const std::string& address, const OnRecord& on_record) {
  off_t at = from;
  while (at < size) {
    RecordCursor cursor(read_at, at, size, address);
    const bool first = at == 0;
    std::optional<std::string> key =
        cursor.field(first ? std::optional(header_key.size()) : std::nullopt);
    TANDEM_CHECK(!first || !key || *key == header_key, foreign(address));
    std::optional<std::string> value = key ? cursor.field() : std::nullopt;
    TANDEM_CHECK(value.has_value() || !first, foreign(address));
    TANDEM_CHECK(value.has_value(), "[store] ", address,
                 " ends in a partial record (a rank died while writing?); remove it and start the "
                 "job again");
    on_record(std::move(*key), std::move(*value));
    at = cursor.at();
  }
  return at;
}

}  // namespace tandem::parallel::file_store
