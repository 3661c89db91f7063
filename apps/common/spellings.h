#pragma once
/// The words a flag takes and the values they name.
///
/// Note [Typed options]: a flag's word is parsed once, at the flag (choice_flag.h), into the enum
/// it names; below the parser code compares enums, never strings, and a value turns back into
/// its name only on the way out (JSON, table labels, a worker's command line, checkpoint
/// metadata). Each enum's words are listed once, in a table of Spellings whose first entry for a
/// value is that value's name.

#include <string>
#include <utility>

#include "engine/error.h"

namespace tandem::apps {

/// A word of the command line and the value it names.
template <typename T>
using Spelling = std::pair<const char*, T>;

/// The name of `value`: its first spelling in `spellings`.
template <typename Spellings, typename T>
const char* name_in(const Spellings& spellings, const T& value) {
  for (const auto& [name, named] : spellings) {
    if (named == value) return name;
  }
  TANDEM_FAIL("[flags] a value without a name");
}

/// The value `word` names in `spellings`, exactly as spelled there.
template <typename Spellings>
auto value_in(const Spellings& spellings, const std::string& word) {
  for (const auto& [name, value] : spellings) {
    if (word == name) return value;
  }
  TANDEM_FAIL("[flags] unknown value '", word, "'");
}

}  // namespace tandem::apps
