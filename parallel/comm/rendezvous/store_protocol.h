#pragma once
/// The wire format between TcpStore clients and the StoreServer (internal to parallel/).
///
/// Each request and each reply is one frame (Note [Frames] in socket.h). A request is a command
/// byte followed by its fields; a reply is a status byte followed by the command's result.
/// Integers are 8-byte big-endian; strings and byte arrays carry a 4-byte length first.
///
///   Set   key value             -> Ok
///   Get   key timeout_ms        -> Ok value        | Timeout
///   Add   key delta             -> Ok new_value    | Failed message
///   Wait  n key... timeout_ms   -> Ok              | Timeout n missing_key...
///   Check n key...              -> Ok present(0|1)

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/error.h"

namespace tandem::parallel::protocol {

enum class Command : uint8_t { Set = 1, Get = 2, Add = 3, Wait = 4, Check = 5 };
enum class Status : uint8_t { Ok = 0, Timeout = 1, Failed = 2 };

/// Appends fields to a message.
class Writer {
 public:
  Writer& u8(uint8_t value) {
    out_.push_back(static_cast<char>(value));
    return *this;
  }
  Writer& i64(int64_t value) {
    for (int shift = 56; shift >= 0; shift -= 8) {
      out_.push_back(static_cast<char>(static_cast<uint64_t>(value) >> shift));
    }
    return *this;
  }
  Writer& bytes(std::string_view value) {
    const auto n = static_cast<uint32_t>(value.size());
    for (int shift = 24; shift >= 0; shift -= 8) out_.push_back(static_cast<char>(n >> shift));
    out_.append(value);
    return *this;
  }
  Writer& strings(const std::vector<std::string>& values) {
    i64(static_cast<int64_t>(values.size()));
    for (const auto& v : values) bytes(v);
    return *this;
  }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

/// Reads fields back, refusing to run past the end (a malformed message is an error, never a
/// read out of bounds).
class Reader {
 public:
  /// Reads `in` in place: it must outlive the Reader (a temporary would not; AddressSanitizer
  /// caught `Reader reply(round_trip(...))` reading a destroyed string).
  explicit Reader(std::string_view in) : in_(in) {}
  explicit Reader(std::string&&) = delete;

  uint8_t u8() { return static_cast<uint8_t>(take(1)[0]); }
  int64_t i64() {
    uint64_t value = 0;
    for (char c : take(8)) value = (value << 8) | static_cast<uint8_t>(c);
    return static_cast<int64_t>(value);
  }
  std::string bytes() {
    uint32_t n = 0;
    for (char c : take(4)) n = (n << 8) | static_cast<uint8_t>(c);
    return std::string(take(n));
  }
  std::vector<std::string> strings() {
    const int64_t n = i64();
    TANDEM_CHECK(n >= 0 && static_cast<size_t>(n) <= in_.size(), "[store] malformed message");
    std::vector<std::string> values;
    for (int64_t i = 0; i < n; ++i) values.push_back(bytes());
    return values;
  }
  bool at_end() const { return in_.empty(); }

 private:
  std::string_view take(size_t n) {
    TANDEM_CHECK(n <= in_.size(), "[store] malformed message (truncated field)");
    const std::string_view part = in_.substr(0, n);
    in_.remove_prefix(n);
    return part;
  }
  std::string_view in_;
};

/// One request, decoded. Fields a command does not use stay empty.
struct Request {
  Command command = Command::Set;
  std::vector<std::string> keys;  ///< one for Set, Get and Add; any number for Wait and Check
  std::string value;              ///< Set
  int64_t delta = 0;              ///< Add
  int64_t timeout_ms = 0;         ///< Get and Wait, as sent (the server clamps it)
};

/// Decodes a request frame. A malformed one (unknown command, truncated or oversized field,
/// bytes left over) throws "[store] malformed message ..."; never reads out of bounds. The
/// server's whole input parsing, fuzzed by tests/fuzz/store_request_fuzz.cpp.
Request parse_request(std::string_view frame);

/// The key count a Wait or Check frame announces (nothing for other commands or a frame too
/// short to say), read before the frame is decoded: a Wait of millions of empty keys is refused
/// for its count instead of first costing a std::string each (review S3).
std::optional<int64_t> announced_keys(std::string_view frame);

/// Why add() fails on a key that holds something else than a counter.
inline constexpr const char* kNotACounter = "the key holds a value that is not an integer counter";

/// The value of a counter made by add() (decimal text, Note in store.h); nothing for a value
/// that is not one.
std::optional<int64_t> parse_counter(std::string_view text);

}  // namespace tandem::parallel::protocol
