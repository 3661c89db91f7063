#include "parallel/comm/rendezvous/store_protocol.h"

#include <charconv>

namespace tandem::parallel::protocol {

Request parse_request(std::string_view frame) {
  Reader in(frame);
  Request request;
  const uint8_t command = in.u8();
  switch (static_cast<Command>(command)) {
    case Command::Set:
      request.keys.push_back(in.bytes());
      request.value = in.bytes();
      break;
    case Command::Get:
      request.keys.push_back(in.bytes());
      request.timeout_ms = in.i64();
      break;
    case Command::Add:
      request.keys.push_back(in.bytes());
      request.delta = in.i64();
      break;
    case Command::Wait:
      request.keys = in.strings();
      request.timeout_ms = in.i64();
      break;
    case Command::Check: request.keys = in.strings(); break;
    default:
      TANDEM_FAIL("[store] malformed message (unknown command ", static_cast<int>(command), ")");
  }
  TANDEM_CHECK(in.at_end(), "[store] malformed message (trailing bytes)");
  request.command = static_cast<Command>(command);
  return request;
}

std::optional<int64_t> announced_keys(std::string_view frame) {
  if (frame.size() < 9) return {};
  const auto command = static_cast<Command>(frame[0]);
  if (command != Command::Wait && command != Command::Check) return {};
  return Reader(frame.substr(1, 8)).i64();
}

std::optional<int64_t> parse_counter(std::string_view text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return {};
  return value;
}

}  // namespace tandem::parallel::protocol
