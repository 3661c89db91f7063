#pragma once
/// The values restart rounds read back from the rendezvous store (Note [Restart rounds]), parsed
/// as untrusted text: any client that reaches the store can write them, and so can a launcher of
/// another version. Note [Round values]: every value is parsed whole (no prefix, no sign, no
/// space) and checked against what the writer could have written; anything else is one
/// tandem::Error naming the key, its value and the store, never a std::invalid_argument escaping
/// as "stoll".

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::parallel {

/// Where a value was read, for the error: the key, and the store as messages name it ("the
/// rendezvous store at 127.0.0.1:29500").
struct RoundValueSource {
  std::string key;
  std::string store;
};

/// A whole decimal integer in [min, max]: "12" yes; "12abc", " 12", "+12", "" no.
int64_t parse_round_int(std::string_view text, int64_t min, int64_t max,
                        const RoundValueSource& source);

/// A sealed round's members, "<tickets>;<id>,<id>,…" (Note [Elastic rounds]).
struct RoundMembers {
  int64_t tickets = 0;   ///< the tickets sealed into the round, 1 … nnodes
  std::vector<int> ids;  ///< their node ids, ascending and unique, each in [0, nnodes)
};

/// Parses and checks a members value: tickets in [1, nnodes], at least one and at most `tickets`
/// ids (a launcher started again by hand holds two tickets under one id), each in [0, nnodes), in
/// ascending order without repeats.
RoundMembers parse_members(std::string_view text, int nnodes, const RoundValueSource& source);

/// A value as a message may show it: at most `max` characters, control characters as '?'.
std::string printable(std::string_view text, size_t max = 200);
/// printable(text, 80) in double quotes.
std::string quote_value(std::string_view text);

}  // namespace tandem::parallel
