#pragma once
/// The message of the tandem::Error that fn throws, or "(no error)" when it throws none, so a
/// test can check what an error says: EXPECT_NE(error_message(f).find("[op] ..."), npos).

#include <string>

#include "engine/error.h"

namespace tandem::testing {

/// Whether `part` occurs in `text` (for checking what an error message says).
inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

template <typename Fn>
std::string error_message(const Fn& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace tandem::testing
