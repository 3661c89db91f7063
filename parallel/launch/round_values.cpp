#include "parallel/launch/round_values.h"

#include <charconv>

#include "engine/error.h"

namespace tandem::parallel {
namespace {

[[noreturn]] void refuse(std::string_view text, const RoundValueSource& source,
                         const std::string& expected) {
  TANDEM_FAIL("[tandem-run] ", source.store, " holds ", quote_value(text), " under ", source.key,
              ", which should be ", expected,
              "; did another program (or another version of tandem-run) write it?");
}

}  // namespace

std::string printable(std::string_view text, size_t max) {
  std::string out;
  for (const char c : text.substr(0, max)) {
    out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
  }
  return text.size() > max ? out + "…" : out;
}

std::string quote_value(std::string_view text) {
  std::string out(1, '"');  // appended, not "\"" + ...: GCC 12 warns falsely (-Wrestrict) on that
  out += printable(text, 80);
  return out += '"';
}

int64_t parse_round_int(std::string_view text, int64_t min, int64_t max,
                        const RoundValueSource& source) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  // from_chars takes a '-' but no '+' or space; a leading '-' is refused by the range below
  // where min >= 0, and nothing may follow the digits.
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc{} || stop != end || value < min || value > max) {
    refuse(text, source,
           "a whole number from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return value;
}

RoundMembers parse_members(std::string_view text, int nnodes, const RoundValueSource& source) {
  const std::string expected =
      "\"<tickets>;<node id>,<node id>,…\" with 1 to " + std::to_string(nnodes) +
      " tickets and as many ascending, unique node ids below " + std::to_string(nnodes);
  const size_t semicolon = text.find(';');
  if (semicolon == std::string_view::npos) refuse(text, source, expected);
  RoundMembers members;
  try {
    members.tickets = parse_round_int(text.substr(0, semicolon), 1, nnodes, source);
    std::string_view rest = text.substr(semicolon + 1);
    while (true) {
      const size_t comma = rest.find(',');
      const int id =
          static_cast<int>(parse_round_int(rest.substr(0, comma), 0, nnodes - 1, source));
      if (!members.ids.empty() && id <= members.ids.back()) refuse(text, source, expected);
      members.ids.push_back(id);
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
  } catch (const Error&) {
    refuse(text, source, expected);  // the whole value, not the piece that failed
  }
  if (static_cast<int64_t>(members.ids.size()) > members.tickets) refuse(text, source, expected);
  return members;
}

}  // namespace tandem::parallel
